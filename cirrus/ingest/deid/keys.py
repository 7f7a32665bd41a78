"""What a field's name says its value is (docs/field-names.md).

A tool result's ``"clientSecret": "..."`` or an ``X-Api-Key`` header holds a
secret whatever the value looks like; ``"pin": 4821`` is a PIN although four
digits are nothing to a pattern.  A key is read as words (``accessKeySecret``,
``access_key_secret``, ``Access-Key-Secret`` and ``ACCESS_KEY_SECRET`` all
read *access key secret*), and its **last word** says what it holds, with the
word before it where the last word alone is too vague (*key*, *name*,
*number*, *address*, *id*, *code*).  The last word decides because English
field names end with their head noun: *input tokens* and *token type* are not
tokens, *password reset required* is a flag, *birth date* is a date of birth.

Chinese keys (``手机号``, ``身份证号``, ``密码``) are read by the words they
contain.  A pipeline's own ``[deid.field_entities]`` (exact key names) come
first; this reading applies to every other key, in JSON objects at any depth,
HTTP headers, query parameters and ``key: value`` / ``key=value`` text.
"""

from __future__ import annotations

import re

# camelCase, PascalCase, snake_case, kebab-case, dotted and spaced keys -> lower-case words
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

# a last word that alone says "secret"
_SECRET_HEADS = frozenset({
    "secret", "token", "password", "passwd", "pwd", "passphrase", "passcode", "pin", "cvv", "cvc", "cvv2", "otp",
    "cookie", "credential", "credentials", "authorization", "apikey", "apitoken", "authtoken", "accesstoken",
    "refreshtoken", "sessiontoken", "privatekey", "signature", "sig",
})
# "... key" is a secret after one of these (api key, private key, signing key, webhook key)
_SECRET_KEY_KINDS = frozenset({"api", "private", "secret", "signing", "encryption", "webhook", "client", "master",
                               "ssh", "auth", "session", "license", "licence", "access", "x"})
_SESSION_ID = frozenset({"session", "sess", "sid"})
_PERSON_NAME_KINDS = frozenset({
    "first", "last", "given", "family", "full", "sur", "middle", "customer", "contact", "cardholder", "holder",
    "recipient", "sender", "passenger", "guest", "patient", "display", "real", "legal", "maiden", "person",
    "owner", "requester", "applicant", "emergency", "billing", "shipping", "buyer", "member", "employee", "agent",
})
_PERSON_HEADS = frozenset({"firstname", "lastname", "surname", "fullname", "givenname", "familyname", "forename",
                           "middlename", "cardholder"})
_EMAIL_HEADS = frozenset({"email", "mail", "emailaddress", "mailbox", "e"})
_PHONE_HEADS = frozenset({"phone", "mobile", "telephone", "tel", "fax", "msisdn", "cellphone", "cell", "phonenumber",
                          "mobilephone", "whatsapp"})
_PHONE_NUMBER_KINDS = frozenset({"phone", "mobile", "telephone", "tel", "fax", "contact", "cell", "callback"})
_ADDRESS_HEADS = frozenset({"street", "postcode", "zipcode", "zip", "postalcode", "streetaddress"})
_BIRTH = frozenset({"birth", "dob", "birthday", "birthdate"})
_SSN = frozenset({"ssn", "socialsecuritynumber", "sin", "nino"})

_ZH_KEYS = (
    (re.compile("密码|口令|密钥|秘钥|私钥|令牌|验证码|支付密码"), "SECRET"),
    (re.compile("身份证"), "CN_RESIDENT_ID"),
    (re.compile("生日|出生"), "DATE_OF_BIRTH"),
    (re.compile("银行卡号|信用卡号|卡号"), "CREDIT_CARD"),
    (re.compile("邮箱|电子邮件|邮件地址"), "EMAIL_ADDRESS"),
    (re.compile("手机|电话|联系方式"), "PHONE_NUMBER"),
    (re.compile("姓名|名字|联系人|收件人|收货人|持卡人|客户名|真实姓名"), "PERSON"),
)
# an address key says "street address" only with a word that places it: a bare
# "address" holds e-mail and IP addresses as often (Chinese addresses are the
# Chinese recognizers': they keep the province, city and district)
_STREET_KINDS = frozenset({"billing", "shipping", "mailing", "home", "street", "postal", "residential", "delivery",
                           "physical", "customer", "registered", "office", "work", "permanent", "current", "contact",
                           "legal", "invoice", "recipient", "pickup", "return", "full"})


def key_words(key: str) -> list[str]:
    """``key`` as lower-case words (``X-Api-Key`` -> x, api, key)."""
    return [word.lower() for word in _WORDS.findall(key)]


def entity_of_key(key: str) -> str | None:
    """The entity a field named ``key`` holds, or None when its name does
    not say (see the module doc)."""
    if not key or len(key) > 64:
        return None
    if re.search(r"[\u3400-\u9fff]", key):
        return next((entity for pattern, entity in _ZH_KEYS if pattern.search(key)), None)
    words = [w for w in key_words(key) if not w.isdigit()]
    if not words:
        return None
    head, before = words[-1], (words[-2] if len(words) > 1 else "")
    joined = "".join(words)
    if head in _SECRET_HEADS or joined in _SECRET_HEADS or (head == "key" and before in _SECRET_KEY_KINDS) or \
            (head in ("id", "key") and before in _SESSION_ID):
        return "SECRET"
    if _BIRTH & set(words) or joined in ("dateofbirth", "birthdate"):
        return "DATE_OF_BIRTH"
    if head in _SSN or joined.endswith("socialsecuritynumber"):
        return "US_SSN"
    if (head == "number" and before in ("card", "cc", "credit")) or joined in ("cardnumber", "ccnumber", "pan"):
        return "CREDIT_CARD"
    if head in _PERSON_HEADS or joined in _PERSON_HEADS or (head == "name" and before in _PERSON_NAME_KINDS):
        return "PERSON"
    if head in _EMAIL_HEADS and (head != "e" or before == "") or (head == "address" and before == "email"):
        return "EMAIL_ADDRESS" if head != "e" else None
    if head in _PHONE_HEADS or (head == "number" and before in _PHONE_NUMBER_KINDS):
        return "PHONE_NUMBER"
    if head in _ADDRESS_HEADS or joined in _ADDRESS_HEADS or (head == "code" and before in ("postal", "zip", "post")) \
            or (head == "address" and before in _STREET_KINDS) or (head == "line" and before == "address"):
        return "STREET_ADDRESS"
    return None


__all__ = ["entity_of_key", "key_words"]
