"""Code-based recognizers that Presidio's defaults lack or under-score.

Pattern recognizers that need no code are declared in the pipeline file.
"""

from __future__ import annotations

import functools
import ipaddress
import re

from presidio_analyzer import AnalysisExplanation, LocalRecognizer, Pattern, PatternRecognizer, RecognizerResult
from presidio_analyzer.predefined_recognizers import PhoneRecognizer

from cirrus.checksums import luhn


class ValidatedPhoneRecognizer(PhoneRecognizer):
    """Presidio's phonenumbers-based recognizer, trusted on its own.

    A match that ``phonenumbers`` validates for one of the configured regions
    is strong evidence; Presidio's base score (0.4) only passes the threshold
    with a context word in a narrow window, which support chats often lack
    ("they're not answering at 780-999-2181").
    """

    SCORE = 0.6

    def analyze(self, text: str, entities: list[str], nlp_artifacts=None) -> list[RecognizerResult]:
        # the cheap pre-check: phonenumbers' matcher (15 regions, one pass each) is the costliest
        # recognizer, and a text with fewer digits than the shortest valid number of any region
        # cannot hold one (see min_phone_digits)
        # (Leniency.VALID and stricter validate the number; POSSIBLE does not)
        if self.leniency != 0 and _fewer_digits_than(text, min_phone_digits()):
            return []
        return super().analyze(text, entities, nlp_artifacts)


@functools.lru_cache(maxsize=1)
def min_phone_digits() -> int:
    """The fewest digits a phone number ``phonenumbers`` validates can have,
    whatever its region: the shortest possible national number of any
    region or non-geographic code (Saint Helena's 4 with phonenumbers 8.x).
    The matcher's candidates are digits and punctuation only (no vanity
    letters), and a valid number's national number has a length its
    region's metadata lists, so a text with fewer digits (Unicode ``\\d``,
    as the matcher reads them) holds no valid number.  Falls back to
    phonenumbers' absolute minimum, 2, where a region lists no lengths."""
    import phonenumbers
    from phonenumbers import PhoneMetadata

    every = [*(PhoneMetadata.metadata_for_region(region) for region in phonenumbers.SUPPORTED_REGIONS),
             *(PhoneMetadata.metadata_for_nongeo_region(code) for code in phonenumbers.COUNTRY_CODES_FOR_NON_GEO_REGIONS)]
    shortest = []
    for metadata in every:
        possible = metadata.general_desc.possible_length if metadata is not None and metadata.general_desc else None
        if not possible or min(possible) < 2:
            return 2
        shortest.append(min(possible))
    return min(shortest, default=2)


@functools.lru_cache(maxsize=8)
def _at_least_digits(count: int) -> re.Pattern[str]:
    return re.compile(r"\d" + r"\D*\d" * (count - 1) if count > 1 else r"\d")


def _fewer_digits_than(text: str, count: int) -> bool:
    return _at_least_digits(count).search(text) is None


class LuhnCardRecognizer(PatternRecognizer):
    """Card numbers of 12 to 19 digits (Maestro, 19-digit Visa) that pass the
    Luhn check; Presidio's card regex covers mostly 13 to 16 digits."""

    # groups joined by nothing, a space, a dash or a dot (4111.1111.1111.1111)
    PATTERN = r"(?<![0-9A-Za-z.+-])[0-9]{4}(?:[ .-]?[0-9]{2,4}){2,4}(?:[ .-]?[0-9]{1,3})?(?![0-9A-Za-z-]|\.[0-9])"

    def __init__(self, supported_language: str = "en") -> None:
        super().__init__(
            supported_entity="CREDIT_CARD",
            name="luhn_card",
            supported_language=supported_language,
            patterns=[Pattern("card_12_19", self.PATTERN, 0.3)],
            context=["card", "credit", "debit", "cc", "visa", "mastercard", "amex", "maestro", "payment"],
        )

    def validate_result(self, pattern_text: str) -> bool | None:
        digits = re.sub(r"[ .-]", "", pattern_text)
        return 12 <= len(digits) <= 19 and luhn(digits) and card_prefix(digits)


def card_prefix(digits: str) -> bool:
    """Whether ``digits`` start like a card of a network (Visa 4, Mastercard
    5 and 2221-2720, Amex/Diners/JCB 3, JCB 1800/2131, Discover/UnionPay 6): order numbers
    and timestamps starting with 1 or 20 that happen to pass Luhn are not
    cards."""
    first = digits[0]
    if first in "456":
        return True
    if first == "3":
        return digits[1:2] in tuple("0456789")
    if len(digits) == 15 and digits.startswith(("1800", "2131")):
        return True  # JCB's 15-digit numbers
    return first == "2" and len(digits) >= 4 and 2221 <= int(digits[:4]) <= 2720


_TOLL_FREE = re.compile(r"^(?:86|0086)?[48]00\d{7}$|^8(?:00|33|44|55|66|77|88)\d{7}$")
_NA_COUNTRY = re.compile(r"^\+?1[\s.-]")  # "1-800-..." (a bare 1866... is a Chinese mobile)
_DATE_HEAD = re.compile(r"^(?:19|20)\d\d[-./](?:0?[1-9]|1[0-2])[-./]")


def not_a_phone(number: str) -> bool:
    """Digit runs a phone recognizer may take that name no person: fewer
    than 7 digits (amounts: "1645元"), company hotlines and toll-free
    numbers (400/800 in China, 1-800 and kin in North America), and a date
    glued to a time ("2024-09-2306:15")."""
    number = number.strip()
    if "/" in number or re.fullmatch(r"\d{1,3}(?:\.\d{1,3}){3}", number):
        return True  # a port range (8080/8080), a path, an IPv4 address
    digits = re.sub(r"\D", "", number)
    if _NA_COUNTRY.match(number):
        digits = digits[1:]
    return len(digits) < 7 or bool(_TOLL_FREE.match(digits)) or bool(_DATE_HEAD.match(number))


class GroupedPhoneRecognizer(LocalRecognizer):
    """Phone numbers that ``phonenumbers`` cannot place without a region:
    European local formats, grouped digits, extensions.

    A bare digit group is weak evidence (order numbers, amounts), so the score
    passes the threshold only with an international ``+`` prefix or a phone
    word shortly before or after the number ("call me on", "Fax:",
    "... office").  Dates and IP addresses are never phone numbers.
    """

    BASE_SCORE = 0.45
    INTERNATIONAL_SCORE = 0.7
    CONTEXT_SCORE = 0.75
    CONTEXT = (
        "phone", "telephone", "tel", "mobile", "cell", "call", "fax", "number", "contact", "reach",
        "dial", "text me", "whatsapp", "office", "desk", "home", "work", "answering", "registered",
        "ring", "sms", "hotline", "电话", "手机",
    )
    _PATTERN = re.compile(
        r"(?<![\w.+/-])(?P<num>(?:\+[0-9]{1,3}[ .-]?)?(?:\(0\)[ .-]?)?(?:\(?[0-9]{1,5}\)?[ .-]?)?"
        r"[0-9]{1,6}(?:[ .-][0-9]{1,6}){0,5}(?:\s?(?:x|ext\.?)\s?[0-9]{1,5})?)(?![0-9A-Za-z])(?![.-][0-9])"
    )
    _DATE = re.compile(r"^\d{4}[-./]\d{1,2}[-./]\d{1,2}$|^\d{1,2}[-./]\d{1,2}[-./]\d{2,4}$")
    _IP = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")

    def __init__(self, supported_language: str = "en") -> None:
        super().__init__(supported_entities=["PHONE_NUMBER"], supported_language=supported_language,
                         name="grouped_phone")

    def load(self) -> None:
        pass

    def _has_context(self, text: str, start: int, end: int) -> bool:
        window = (text[max(0, start - 48) : start] + " " + text[end : end + 16]).lower()
        return any(word in window for word in self.CONTEXT)

    def analyze(self, text: str, entities: list[str], nlp_artifacts=None) -> list[RecognizerResult]:
        results = []
        for match in self._PATTERN.finditer(text):
            number = match.group("num").strip()
            digits = sum(ch.isdigit() for ch in number.split("x")[0].split("ext")[0])
            if not 7 <= digits <= 15 or self._DATE.match(number) or self._IP.match(number):
                continue
            if number.isdigit() and len(number) > 11:
                continue  # one long run: an account or order id, not a phone
            start, end = match.start("num"), match.start("num") + len(number)
            if self._has_context(text, start, end):
                score = self.CONTEXT_SCORE
            elif number.startswith("+"):
                score = self.INTERNATIONAL_SCORE
            else:
                score = self.BASE_SCORE
            explanation = AnalysisExplanation(recognizer=self.name, original_score=score)
            results.append(RecognizerResult("PHONE_NUMBER", start, end, score, analysis_explanation=explanation,
                                            recognition_metadata={RecognizerResult.RECOGNIZER_NAME_KEY: self.name,
                                                                  RecognizerResult.IS_SCORE_ENHANCED_BY_CONTEXT_KEY: True}))
        return results


# a dotted quad after one of these is a version, not an address ("build 1.2.3.4")
VERSION_WORD = re.compile(r"(?i:\b(?:v|ver|version|release|build|firmware|kernel|rev|revision))\.?\s*[:=]?\s*$",
                          re.ASCII)


class IpAddressRecognizer(LocalRecognizer):
    """IPv4 and IPv6 addresses, with a CIDR suffix when one is written,
    validated with :mod:`ipaddress`.

    Presidio's own IP recognizer is a fixed regex whose behaviour changed
    between patch releases (2.2.362 stops ``2001:db8:85a3::8a2e:370:7334`` at
    ``2001:db8:85a3::`` and ``10.0.0.0/8`` before its suffix): here a loose
    candidate is found and the standard library decides what is an address,
    so the span is the whole address whatever Presidio version is installed.
    """

    ENTITY = "IP_ADDRESS"
    SCORE = 0.6
    # ASCII classes around the address: a Chinese character is a word
    # character to \w, and addresses are written right next to Chinese text
    _IPV4 = r"(?<![0-9A-Za-z_.])(?:\d{1,3}\.){3}\d{1,3}(?:/\d{1,2})?(?!\.?[0-9A-Za-z_])"
    _IPV6 = (r"(?<![0-9A-Za-z_:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{1,4})?"
             r"(?:%[0-9A-Za-z]+)?(?:/\d{1,3})?(?![0-9A-Za-z_:])")
    _CANDIDATE = re.compile(f"{_IPV4}|{_IPV6}")

    def __init__(self, supported_language: str = "en") -> None:
        super().__init__(supported_entities=[self.ENTITY], name="ip_address", supported_language=supported_language)

    def load(self) -> None:
        pass

    @staticmethod
    def is_any(candidate: str) -> bool:
        """``0.0.0.0``, ``0.0.0.0/0``, ``::/0``: "any address" in a rule; ``127.0.0.1``, ``::1``: the
        machine itself; nobody's machine."""
        address = candidate.partition("/")[0].split("%", 1)[0]
        try:
            parsed = ipaddress.ip_address(address)
        except ValueError:
            return False
        return parsed.is_unspecified or parsed.is_loopback  # 127.0.0.1 is every machine's own

    @staticmethod
    def is_address(candidate: str) -> bool:
        address, _, prefix = candidate.partition("/")
        address = address.split("%", 1)[0]  # an IPv6 zone (fe80::1%eth0)
        if not any(c.isdigit() for c in address):
            return False  # "::" alone, code such as "a::b" or "std::cout"
        try:
            parsed = ipaddress.ip_address(address)
        except ValueError:
            return False
        return not prefix or (prefix.isdigit() and int(prefix) <= parsed.max_prefixlen)

    def analyze(self, text: str, entities: list[str], nlp_artifacts=None) -> list[RecognizerResult]:
        results = []
        for match in self._CANDIDATE.finditer(text):
            candidate, start = match.group(), match.start()
            # an address at the end of a sentence or list ("... 2001:db8::1:")
            while candidate and not self.is_address(candidate) and candidate[-1] in ":.":
                candidate = candidate[:-1]
            if candidate and self.is_address(candidate) and not self.is_any(candidate) and not (
                    "." in candidate and "/" not in candidate and ":" not in candidate
                    and VERSION_WORD.search(text, max(0, start - 24), start)):
                results.append(RecognizerResult(
                    self.ENTITY, start, start + len(candidate), self.SCORE,
                    AnalysisExplanation(recognizer=self.name, original_score=self.SCORE,
                                        textual_explanation="validated by the ipaddress module"),
                    recognition_metadata={RecognizerResult.RECOGNIZER_NAME_KEY: self.name,
                                          RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id}))
        return results


_AT_MARKED = r"(?:\s*[\[({]\s*at\s*[\])}]\s*|%40)"
_AT_WORD = r"\s+at\s+"
_DOT_MARKED = r"(?:\s*[\[({]\s*dot\s*[\])}]\s*|\s+dot\s+)"
_DOT_ANY = rf"(?:{_DOT_MARKED}|\.)"
_LOCAL = rf"[A-Za-z0-9][A-Za-z0-9_%+-]*(?:{_DOT_ANY}[A-Za-z0-9_%+-]+)*"
_LABEL = r"[A-Za-z0-9][A-Za-z0-9-]{0,62}"
_TLD = r"[A-Za-z]{2,12}(?![A-Za-z0-9])"


class ObfuscatedEmailRecognizer(PatternRecognizer):
    """E-mail addresses written to dodge scrapers or encoded in URLs:
    ``jroe77 [at] outlook [dot] com``, ``jane (at) example (dot) org``,
    ``urlenc.person%40proton.me``, ``jane dot roe at gmail dot com``.

    A plain " at " is an ordinary word ("I'm at home.com"?), so with it the
    domain must spell a dot out (``dot``, ``[dot]``); a marked at (``[at]``,
    ``(at)``, ``%40``) needs no more."""

    PATTERNS = (
        Pattern("email_marked_at", rf"(?i)(?<![A-Za-z0-9._%+-]){_LOCAL}{_AT_MARKED}{_LABEL}(?:{_DOT_ANY}{_LABEL})*"
                                   rf"{_DOT_ANY}{_TLD}", 0.8),
        Pattern("email_word_at", rf"(?i)(?<![A-Za-z0-9._%+-]){_LOCAL}{_AT_WORD}{_LABEL}(?:{_DOT_ANY}{_LABEL})*"
                                 rf"{_DOT_MARKED}{_TLD}", 0.7),
    )

    def __init__(self, supported_language: str = "en") -> None:
        super().__init__(supported_entity="EMAIL_ADDRESS", name="obfuscated_email",
                         supported_language=supported_language, patterns=list(self.PATTERNS))

    @staticmethod
    def plain(text: str) -> str:
        """The address an obfuscated one stands for."""
        text = re.sub(rf"(?i){_AT_MARKED}|{_AT_WORD}", "@", text)
        return re.sub(rf"(?i){_DOT_MARKED}", ".", text).replace(" ", "")

    def validate_result(self, pattern_text: str) -> bool | None:
        """Only an address whose domain ends in a real public suffix
        (tldextract's bundled list): "cn-hangzhou [dot] region" is not one."""
        import tldextract

        from cirrus.offline import use_bundled_suffix_list

        use_bundled_suffix_list()  # never fetch the list (cached: once per process)
        domain = self.plain(pattern_text).rpartition("@")[2]
        return bool(tldextract.extract(domain).suffix)


# detect-secrets plugins that recognise a secret by its own format (the
# entropy plugins are left out: on free text they flag ordinary words)
SECRET_PLUGINS = (
    "AWSKeyDetector", "ArtifactoryDetector", "AzureStorageKeyDetector", "BasicAuthDetector", "CloudantDetector",
    "DiscordBotTokenDetector", "GitHubTokenDetector", "GitLabTokenDetector", "IbmCloudIamDetector",
    "JwtTokenDetector", "MailchimpDetector", "NpmDetector", "OpenAIDetector", "PrivateKeyDetector",
    "PypiTokenDetector", "SendGridDetector", "SlackDetector", "SoftlayerDetector", "SquareOAuthDetector",
    "StripeDetector", "TelegramBotTokenDetector", "TwilioKeyDetector",
)
# "password" in the languages support tickets are written in, as software translates it on login forms
# (the "Password" string of common UI localisations: de, es, fr, pt, it, nl, sv, da/no, fi, pl, cs/sk, hu,
# ro/tr, ru/uk, el, ja, ko, ar, he, hi, vi, id/ms, hr/sl, et, lt); the Chinese ones are _SECRET_CUE_ZH's
PASSWORD_WORDS = (
    "passwort", "kennwort", "contrase(?:ñ|n)a", "clave", "mot de passe", "senha", "palavra-passe", "wachtwoord",
    "l(?:ö|o)senord", "adgangskode", "passord", "salasana", "has(?:ł|l)o", "heslo", "jelsz(?:ó|o)", "parola",
    "(?:ş|s)ifre", "пароль", "κωδικός(?: πρόσβασης)?", "συνθηματικό", "パスワード", "비밀번호", "암호",
    "كلمة (?:المرور|السر)", "סיסמ(?:ה|א)", "पासवर्ड", "mật khẩu", "kata sandi", "lozinka", "geslo", "parool",
    "slapta(?:ž|z)odis",
)
# a key naming a secret, then ":", "=", "is" or "was", then the value
# (the key ends with the secret's name: "aws_secret_access_key", "AccessKeySecret",
# "db_password"; never "input_tokens" or "max_tokens")
_SECRET_KEY = (r"(?<![A-Za-z0-9])[A-Za-z0-9_-]*?(?i:password|passwd|passphrase|passcode|pwd|secret|token|"
               r"api[_ -]?key|private[_ -]?key|secret[_ -]?key|access[_-]?key[_-]?secret|secret[_-]?access[_-]?key|"
               r"credentials?|" + "|".join(PASSWORD_WORDS) + r")(?![A-Za-z0-9])")
# "is" in the languages of PASSWORD_WORDS ("Passwort ist ...", "la contraseña es ...", "la password è ...")
_COPULA = r"is|was|ist|war|es|era|est|était|é|è|är|var|jest|был|это|είναι"
_SECRET_CUE = re.compile("(?i)(?P<key>" + _SECRET_KEY + r")[\"']?\s*(?:[:=：]|\b(?:" + _COPULA + r")(?!\w))\s*[\"']?"
                         r"(?P<value>[^\s\"',;<>]{4,})")
_PASSWORD_KEY = re.compile(r"(?i)pass|pwd|密码|口令")
# Chinese cues: "密钥是k3Jd8...", "AccessKey Secret为...", "登录密码：Abc@1234"
_SECRET_CUE_ZH = re.compile(r"(?P<key>密钥|秘钥|私钥|密码|口令|令牌|[Ss]ecret)\s*(?:是|为|:|：|=)\s*[\"'“]?"
                            r"(?P<value>[!-~]{6,})")
# HTTP Basic credentials: base64 of "user:password" after "Basic" (checked by decoding, _basic_credentials)
_BASIC_AUTH = re.compile(r"(?i)\bbasic\s+(?P<value>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])")
# passwords on a command line: --password X, sshpass -p X, mysql -pX, curl -u user:pass
_COMMAND_LINE = (
    re.compile(r"(?i)(?:^|\s)--?(?:password|passwd|pass)(?:=|\s+)[\"']?(?P<value>[^\s\"']{4,})"),
    re.compile(r"\bsshpass\s+-p\s*[\"']?(?P<value>[^\s\"']{4,})"),
    re.compile(r"\bmysql(?:dump|admin)?\b[^\n]*?\s-p(?P<value>[^\s\-\"'][^\s\"']{3,})"),
    re.compile(r"\bcurl\b[^\n]*?\s(?:-u|--user)\s+[\"']?[^\s:\"']+:(?P<value>[^\s\"']{4,})"),
)
_SECRET_FORMATS = (
    re.compile(r"(?i)\bbearer\s+(?P<value>[A-Za-z0-9._~+/-]{16,}=*)"),
    *_COMMAND_LINE,
    re.compile(r"(?<![A-Za-z0-9])(?P<value>ya29\.[0-9A-Za-z_-]{16,})"),  # Google OAuth access tokens
    # any armoured private key (RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP ... KEY BLOCK), to its END line or
    # to the end of the text; a PuTTY key file from its header to its Private-MAC line
    re.compile(r"(?P<value>-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY"
               r"(?: BLOCK)?-----|[\s\S]*))"),
    re.compile(r"(?P<value>PuTTY-User-Key-File-\d+:[\s\S]*?(?:Private-MAC:[^\n]*|Private-Hash:[^\n]*|$(?![\s\S])))"),
    # a session cookie: a cookie whose name says session (PHPSESSID, JSESSIONID, connect.sid, laravel_session,
    # ASP.NET_SessionId, _gh_sess, sessionid), holding a random value of 16+ characters
    re.compile(r"(?i)(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]*(?:sess|sid)[A-Za-z0-9_.-]*=(?P<value>(?=[^\s;,\"'&]*\d)"
               r"(?=[^\s;,\"'&]*[A-Za-z])[^\s;,\"'&]{16,})"),
    re.compile(r"(?i)[?&](?:api[_-]?key|key|token|access_token|secret|sig|signature|password|auth)="
               r"(?P<value>[^&\s#\"']{4,})"),
    # a random-looking string of 20+ characters (upper and lower case and a
    # digit) a few words after "secret", "key", "token" or "credential":
    # "with secret wJalrXUtnFEMI/K7MDENG...", "secret key ak3r2g..."
    re.compile(r"(?<![A-Za-z0-9])(?i:secret|key|token|credentials?)(?:\s+[A-Za-z]+){0,2}?\s*(?:[:=]|\bis\b)?\s*"
               r"(?P<value>(?=[A-Za-z0-9/+=_-]*[0-9])(?=[A-Za-z0-9/+=_-]*[a-z])(?=[A-Za-z0-9/+=_-]*[A-Z])"
               r"[A-Za-z0-9/+=_-]{20,})(?![A-Za-z0-9/+=_-])"),
)
_MASKED = re.compile(r"\*{3}|^<[^>]*>$|^\[[^\]]*\]$|^x{4,}$", re.IGNORECASE)
# a provider's token: a short lower-case vendor prefix and an optional version, joined by "_", then 32+
# random characters (Shopify shpat_/shpss_/shpca_, DigitalOcean dop_v1_/doo_v1_, Hugging Face hf_,
# Doppler dp_pt_, Linear lin_api_, ...): the shape providers adopted so that scanners can find their
# tokens; the tail must look random (digits and letters, many distinct characters), not a snake_case name
_PREFIX_TOKEN = re.compile(r"(?<![A-Za-z0-9_.-])(?P<value>[a-z][a-z0-9]{1,7}_(?:[a-z0-9]{1,6}_)?"
                           r"(?P<tail>[A-Za-z0-9]{32,}))(?![A-Za-z0-9_-])")


def _random_tail(tail: str) -> bool:
    """A token's random part: digits and letters, at least 12 distinct characters."""
    return any(c.isdigit() for c in tail) and any(c.isalpha() for c in tail) and len(set(tail)) >= 12


# Microsoft's maintained secret patterns (package microsoft-security-utilities-secret-masker, the rules of
# github.com/microsoft/security-utilities): Azure's identifiable keys (Service Bus, Event Hub, Storage,
# Cosmos DB, Function, Search, APIM, Redis, ...; a fixed signature such as "+ASb" inside the key), their
# legacy connection-string forms, NuGet and Databricks tokens
MICROSOFT_PATTERN_FILE = "PreciselyClassifiedSecurityKeys.json"


@functools.cache
def microsoft_patterns() -> tuple[tuple[re.Pattern[str], tuple[str, ...], str], ...]:
    """(regex, signatures, rule name) of :data:`MICROSOFT_PATTERN_FILE`; a
    rule runs only on a text holding one of its signatures (when it has any)."""
    import json
    from importlib import resources

    source = resources.files("microsoft_security_utilities_secret_masker") / "GeneratedRegexPatterns"
    rules = json.loads((source / MICROSOFT_PATTERN_FILE).read_text(encoding="utf-8"))
    return tuple((re.compile(rule["Pattern"], re.ASCII), tuple(rule.get("Signatures") or ()), rule.get("Name", ""))
                 for rule in rules)


def _looks_secret(value: str) -> bool:
    """A cue's value is a secret when it is not a plain word ("the token is
    expired", "password: incorrect"): it holds a digit or a symbol, or mixes
    letter case past the first letter; a value already masked is not."""
    if _MASKED.search(value):
        return False
    return (any(c.isdigit() for c in value) or any(not c.isalnum() for c in value)
            or (any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)))


def _basic_credentials(value: str) -> bool:
    """Whether ``value`` is base64 of ``user:password`` (printable text
    with a colon), as HTTP Basic authentication sends it."""
    import base64
    import binascii

    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon and user and password and decoded.isprintable())


class SecretRecognizer(LocalRecognizer):
    """Credentials in text: the formats ``detect-secrets`` knows (AWS, Azure,
    JWT, Slack, GitHub, Stripe, private keys, basic auth in URLs, ...), run
    line by line; bearer and Google OAuth tokens; whole PEM private-key
    blocks; secret-bearing query parameters (``?api_key=``); and a value
    after a key that names a secret (``password: hunter2``, ``pwd is ...``,
    ``"api_key": "..."``, ``AccessKeySecret=...``); HTTP Basic credentials
    (``Authorization: Basic <base64 of user:password>``, checked by
    decoding) and passwords on a command line (``--password X``, ``sshpass
    -p X``, ``mysql -pX``, ``curl -u user:pass``)."""

    SCORE = 0.95

    def __init__(self, supported_language: str = "en") -> None:
        super().__init__(supported_entities=["SECRET"], name="secrets", supported_language=supported_language)

    def load(self) -> None:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

        classes = {cls.__name__: cls for cls in get_mapping_from_secret_type_to_class().values()}
        self._plugins = [classes[name]() for name in SECRET_PLUGINS]
        self._microsoft = microsoft_patterns()

    def analyze(self, text: str, entities: list[str], nlp_artifacts: object = None) -> list[RecognizerResult]:
        spans: list[tuple[int, int, str]] = []
        for match in _BASIC_AUTH.finditer(text):
            if _basic_credentials(match.group("value")):
                spans.append((match.start("value"), match.end("value"), "basic_auth"))
        for pattern in (_SECRET_CUE, _SECRET_CUE_ZH, *_SECRET_FORMATS):
            for match in pattern.finditer(text):
                value = match.group("value")
                if pattern is _SECRET_CUE_ZH:
                    value = value.rstrip("\"'”,.;:!?)")
                    if not _looks_secret(value) or (value.isdigit() and not _PASSWORD_KEY.search(match.group("key"))):
                        continue
                    spans.append((match.start("value"), match.start("value") + len(value), "zh_cue"))
                    continue
                if pattern is _SECRET_CUE and (not _looks_secret(value) or (
                        value.isdigit() and not _PASSWORD_KEY.search(match.group("key")))):
                    continue  # "token: 1234567890123456" is an id; "password: 12345678" is not
                spans.append((match.start("value"), match.end("value"), pattern.pattern[:40]))
        for match in _PREFIX_TOKEN.finditer(text):
            if _random_tail(match.group("tail")):
                spans.append((match.start("value"), match.end("value"), "provider_token"))
        for pattern, signatures, name in self._microsoft:
            if not signatures or any(sig in text for sig in signatures):
                for match in pattern.finditer(text):
                    group = "refine" if "refine" in pattern.groupindex else 0
                    spans.append((match.start(group), match.end(group), name))
        spans += self._plugin_spans(text)
        return [RecognizerResult("SECRET", start, end, self.SCORE,
                                 AnalysisExplanation(self.name, self.SCORE, pattern_name=why))
                for start, end, why in spans]

    def _plugin_spans(self, text: str) -> list[tuple[int, int, str]]:
        spans = []
        offset = 0
        for line in text.splitlines(keepends=True):
            if len(line.strip()) >= 8:
                for secret in {s for plugin in self._plugins for s in plugin.analyze_line(filename="ticket", line=line)}:
                    value = secret.secret_value or ""
                    if len(value) >= 8 and not _MASKED.search(value):
                        start = line.find(value)
                        while start >= 0:
                            spans.append((offset + start, offset + start + len(value), secret.type))
                            start = line.find(value, start + 1)
            offset += len(line)
        return spans


# --- reference numbers: orders, waybills, invoices, members, accounts, tickets, bookings, handles -----------

# a word that says an identifier follows ("order", "waybill", "booking ref", "订单号", "运单号", "会员", "QQ")
_REFERENCE_CUE_EN = (r"(?i:\b(?:order|purchase|waybill|tracking|shipment|parcel|consignment|invoice|receipt|"
                     r"member(?:ship)?|loyalty|account|acct|customer|client|ticket|case|booking|reservation|"
                     r"confirmation|pnr|reference|ref|rma|return|refund|transaction|txn|policy|contract|subscription)"
                     r"(?:\s+(?:no\.?|nr\.?|number|num|id|code|ref(?:erence)?|#))?)")
_REFERENCE_CUE_ZH = (r"(?:订单(?:编号|号码|号|ID|id)?|运单(?:编号|号)?|快递单号|物流单号|单号|退货单号|退款单号|发票(?:号码|号)?|"
                     r"会员(?:卡号|号|ID|id)?|账号|帐号|账户|工单(?:编号|号)?|预订号|预约号|订票号|交易(?:单号|号)|流水号|合同号|保单号|"
                     r"QQ号?|qq号?|微信号?|淘宝(?:账号|ID|id)|旺旺(?:号|ID)?)")
_REFERENCE = re.compile(
    f"(?:{_REFERENCE_CUE_EN}|{_REFERENCE_CUE_ZH})"
    r"(?:\s*(?:is|was|:|：|#|＃|=|为|是)\s*|\s+|(?<=[\u3400-\u9fff号]))[#＃]?\s*"
    r"(?P<value>[A-Za-z0-9](?:[A-Za-z0-9]|[-_/.](?=[A-Za-z0-9])){3,39})(?![A-Za-z0-9@])"
)
# a reference code by its shape alone: letters, then two or more groups holding 8+ digits (INV-2025-000871)
_REFERENCE_SHAPE = re.compile(r"(?<![A-Za-z0-9_-])(?P<value>[A-Z]{2,5}[-_](?:\d{3,}[-_]){1,3}\d{3,})(?![A-Za-z0-9_-])")
# a handle: @name (not an e-mail's domain)
_HANDLE_AT = re.compile(r"(?<![\w.@])@(?P<value>[A-Za-z][A-Za-z0-9_]{2,29})(?![\w@.-]*\.[A-Za-z]{2,})\b")


def _reference_like(value: str, cue: str) -> bool:
    """A cue's value is an identifier: it holds at least 3 digits (an order
    "is ready" is no id), or, after a chat-app cue (微信, QQ), is a handle."""
    digits = sum(c.isdigit() for c in value)
    if digits >= 3:
        return not re.fullmatch(r"\d{1,4}[./-]\d{1,2}(?:[./-]\d{1,4})?", value)  # a date, not an id
    return cue.lower().startswith(("微信", "wechat")) and len(value) >= 6 and any(c.isdigit() or c in "_-" for c in value)


class ReferenceRecognizer(LocalRecognizer):
    """Identifiers that lead to a customer (contract 2): order, waybill,
    invoice, member, account, ticket and booking numbers, found after a word
    that names them in English or Chinese (``order #``, ``booking ref``,
    ``订单号：``, ``运单号``, ``会员``, ``QQ``, ``微信号``) when the value holds
    digits; reference codes by their shape alone (letters, then digit groups
    of 8 digits or more: ``INV-2025-000871``); and ``@handles``.  The value's
    own recognizer wins where one applies (a phone, a card, an account id):
    ``REFERENCE_ID`` has the lowest priority.  Codes a pipeline declares
    non-personal (``[deid] non_personal_codes``) are kept."""

    CUE_SCORE = 0.8
    SHAPE_SCORE = 0.6
    HANDLE_SCORE = 0.6

    def __init__(self, supported_language: str = "en") -> None:
        super().__init__(supported_entities=["REFERENCE_ID"], name="reference_id",
                         supported_language=supported_language)

    def load(self) -> None:
        pass

    def analyze(self, text: str, entities: list[str], nlp_artifacts: object = None) -> list[RecognizerResult]:
        found: list[tuple[int, int, float, str]] = []
        for match in _REFERENCE.finditer(text):
            value = match.group("value").rstrip(".")
            cue = text[match.start():match.start("value")].strip()
            if _reference_like(value, cue):
                found.append((match.start("value"), match.start("value") + len(value), self.CUE_SCORE, "cue"))
        for match in _REFERENCE_SHAPE.finditer(text):
            value = match.group("value")
            if sum(c.isdigit() for c in value) >= 8:
                found.append((match.start("value"), match.end("value"), self.SHAPE_SCORE, "shape"))
        for match in _HANDLE_AT.finditer(text):
            found.append((match.start(), match.end("value"), self.HANDLE_SCORE, "handle"))
        return [RecognizerResult("REFERENCE_ID", start, end, score,
                                 AnalysisExplanation(self.name, score, pattern_name=why))
                for start, end, score, why in found]


# --- values named by their field in text: "dateOfBirth: 1990-04-12", "pin=4821", "?ssn=..." ---------------

# Latin keys only: Chinese text's cues are the Chinese recognizers' (cirrus.ingest.deid.zh)
_VALUE_CHARS = r"[^\s\"',;&?<>|()\[\]{}\u3000-\u303f\uff01-\uff0f\uff1a-\uff20\u3400-\u9fff]"
_FIELD_TEXT = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<key>[A-Za-z][A-Za-z0-9_.-]{1,40})[\"']?\s*(?:[:：=])\s*[\"']?"
    f"(?P<value>{_VALUE_CHARS}{{2,80}}(?:[ ](?![A-Za-z_][A-Za-z0-9_.-]*\\s*[:=]){_VALUE_CHARS}{{1,40}}){{0,3}})")
_ONE_TOKEN = frozenset({"SECRET", "US_SSN", "DATE_OF_BIRTH", "CREDIT_CARD", "PHONE_NUMBER", "EMAIL_ADDRESS",
                        "CN_RESIDENT_ID"})


class FieldTextRecognizer(LocalRecognizer):
    """A value whose field name says what it is, written as text: ``key:
    value``, ``key=value`` (headers, query strings, form fields, logs), read
    with :func:`cirrus.ingest.deid.keys.entity_of_key`.  Secrets must look
    like one (not "token: expired"); names and addresses may run over a few
    words, the rest is one token."""

    SCORE = 0.7

    def __init__(self, supported_language: str = "en") -> None:
        super().__init__(supported_entities=["SECRET", "US_SSN", "DATE_OF_BIRTH", "CREDIT_CARD", "PHONE_NUMBER",
                                             "EMAIL_ADDRESS", "PERSON", "STREET_ADDRESS", "CN_RESIDENT_ID"],
                         name="field_text", supported_language=supported_language)

    def load(self) -> None:
        pass

    def analyze(self, text: str, entities: list[str], nlp_artifacts: object = None) -> list[RecognizerResult]:
        from cirrus.ingest.deid.keys import entity_of_key

        if ":" not in text and "=" not in text and "：" not in text:
            return []
        results = []
        for match in _FIELD_TEXT.finditer(text):
            entity = entity_of_key(match.group("key"))
            if entity is None or (entities and entity not in entities):
                continue
            value = match.group("value").rstrip(".")
            if entity in _ONE_TOKEN:
                value = value.split(" ")[0].rstrip(".")
            if entity == "SECRET" and not _looks_secret(value):
                continue
            if entity == "PERSON" and not all(word[:1].isupper() for word in value.split()):
                continue  # "name: it needs to match" is a sentence, not a name
            if entity == "STREET_ADDRESS" and not (any(c.isdigit() for c in value)
                                                   and any(word[:1].isupper() for word in value.split())):
                continue  # an address holds a number and a name: "57 Holloway Mews"
            start = match.start("value")
            results.append(RecognizerResult(entity, start, start + len(value), self.SCORE,
                                            AnalysisExplanation(self.name, self.SCORE, pattern_name="field name")))
        return results


# --- identifiers with check digits (python-stdnum), device ids, dates of birth ------------------------------

_IBAN_ANY = re.compile(r"(?<![A-Za-z0-9])(?P<value>[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]){11,30})(?![A-Za-z0-9])")
_IMEI = re.compile(r"(?i)\b(?:imei|meid)\b[^0-9\n]{0,12}(?P<value>\d(?:[ -]?\d){14,15})(?!\d)")
_VIN = re.compile(r"(?<![A-Za-z0-9])(?P<value>[A-HJ-NPR-Z0-9]{17})(?![A-Za-z0-9])")
_VIN_CUE = re.compile(r"(?i)\b(?:vin|vehicle identification|chassis)\b")
_DE_TAX_ID = re.compile(r"(?i)(?:steuer-?id|steuerliche identifikationsnummer|idnr|tax id|steuernummer)"
                        r"[^0-9\n]{0,16}(?P<value>\d{2}\s?\d{3}\s?\d{3}\s?\d{3})(?!\d)")
_FR_NIR = re.compile(r"(?i)(?:\bnir\b|s[ée]curit[ée] sociale|num[ée]ro de s[ée]cu|social security)"
                     r"[^0-9\n]{0,16}(?P<value>[12]\s?\d{2}\s?\d{2}\s?(?:\d{2}|2[AB])\s?\d{3}\s?\d{3}\s?\d{2})(?!\d)")
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_DATE = (rf"(?:\d{{4}}[-/.]\d{{1,2}}[-/.]\d{{1,2}}|\d{{1,2}}[-/.]\d{{1,2}}[-/.]\d{{2,4}}"
         rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\.?,?\s+\d{{4}}"
         rf"|(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
         rf"|\d{{4}}年\d{{1,2}}月\d{{1,2}}日)")
_BIRTH_DATE = re.compile(rf"(?i)(?:\bborn\b|\bbirth|\bd\.?o\.?b\b|birthday|出生|生日)[^.\n]{{0,24}}?(?P<value>{_DATE})")
_VIN_WEIGHTS = (8, 7, 6, 5, 4, 3, 2, 10, 0, 9, 8, 7, 6, 5, 4, 3, 2)
_VIN_VALUES = {**{str(d): d for d in range(10)}, **dict(zip("ABCDEFGH", range(1, 9))), **dict(zip("JKLMN", range(1, 6))),
               "P": 7, "R": 9, **dict(zip("STUVWXYZ", range(2, 10)))}


def vin_check_digit_ok(vin: str) -> bool:
    """The check digit (9th character) of a North American VIN."""
    total = sum(_VIN_VALUES[c] * w for c, w in zip(vin, _VIN_WEIGHTS))
    check = total % 11
    return vin[8] == ("X" if check == 10 else str(check))


class CheckDigitRecognizer(LocalRecognizer):
    """Identifiers whose check digits a well-kept library validates
    (``python-stdnum``): IBANs of every country, IMEIs after their cue,
    German tax ids and French social security numbers after theirs; vehicle
    identification numbers by their check digit or their cue; and dates of
    birth, a date near a birth cue (in words too: "born on 3 March 1984")."""

    SCORE = 0.85

    def __init__(self, supported_language: str = "en") -> None:
        super().__init__(supported_entities=["IBAN_CODE", "DEVICE_ID", "NATIONAL_ID", "DATE_OF_BIRTH"],
                         name="check_digits", supported_language=supported_language)

    def load(self) -> None:
        from stdnum import iban, imei
        from stdnum.de import idnr
        from stdnum.fr import nir

        self._iban, self._imei, self._idnr, self._nir = iban.is_valid, imei.is_valid, idnr.is_valid, nir.is_valid

    def analyze(self, text: str, entities: list[str], nlp_artifacts: object = None) -> list[RecognizerResult]:
        found: list[tuple[int, int, str, str]] = []
        for match in _IBAN_ANY.finditer(text):
            if self._iban(match.group("value")):
                found.append((match.start("value"), match.end("value"), "IBAN_CODE", "iban"))
        for match in _IMEI.finditer(text):
            if self._imei(match.group("value")):
                found.append((match.start("value"), match.end("value"), "DEVICE_ID", "imei"))
        for match in _VIN.finditer(text):
            value = match.group("value")
            if any(c.isalpha() for c in value) and any(c.isdigit() for c in value) and (
                    vin_check_digit_ok(value) or _VIN_CUE.search(text[max(0, match.start() - 40):match.start()])):
                found.append((match.start("value"), match.end("value"), "DEVICE_ID", "vin"))
        for pattern, check, why in ((_DE_TAX_ID, self._idnr, "de_idnr"), (_FR_NIR, self._nir, "fr_nir")):
            for match in pattern.finditer(text):
                if check(match.group("value")):
                    found.append((match.start("value"), match.end("value"), "NATIONAL_ID", why))
        for match in _BIRTH_DATE.finditer(text):
            found.append((match.start("value"), match.end("value"), "DATE_OF_BIRTH", "birth cue"))
        return [RecognizerResult(entity, start, end, self.SCORE,
                                 AnalysisExplanation(self.name, self.SCORE, pattern_name=why))
                for start, end, entity, why in found if not entities or entity in entities]


class ContextRequired(LocalRecognizer):
    """A Presidio recognizer whose finds count only next to one of its own
    context words ("PESEL", "tax file number", "NHS"): an identifier that is
    all digits and passes a checksum is one in ten random numbers (a disk
    sector, a phone number) without them."""

    WINDOW = 48

    def __init__(self, inner: LocalRecognizer) -> None:
        super().__init__(supported_entities=list(inner.supported_entities), name=inner.name,
                         supported_language=inner.supported_language, context=list(inner.context or ()))
        self.inner = inner

    def load(self) -> None:
        pass

    def analyze(self, text: str, entities: list[str], nlp_artifacts: object = None) -> list[RecognizerResult]:
        words = [w.lower() for w in self.inner.context or ()]
        if all(word.isascii() for word in words):
            # the cheap pre-check: a find counts only with a context word in its window, a slice of
            # the text, so a text without any of them anywhere keeps nothing (lower-casing is per
            # character for the ASCII letters of the words)
            lowered = text.lower()
            if not any(word in lowered for word in words):
                return []
        kept = []
        for result in self.inner.analyze(text, entities, nlp_artifacts):
            window = text[max(0, result.start - self.WINDOW):result.end + 16].lower()
            if any(word in window for word in words):
                # Presidio matches results to recognizers by id: the result is this wrapper's now
                result.recognition_metadata = {**(result.recognition_metadata or {}),
                                               RecognizerResult.RECOGNIZER_NAME_KEY: self.name,
                                               RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id}
                kept.append(result)
        return kept


# --- names in other scripts: Cyrillic, Greek, Arabic, Hebrew, Devanagari, Hangul, Japanese ------------------

# a word of one non-Latin alphabetic script (no Han: Chinese names are the Chinese recognizers')
_SCRIPT_WORD = (r"(?:[\u0400-\u04FF]+|[\u0370-\u03FF\u1F00-\u1FFF]+|[\u0600-\u06FF]+|[\u0590-\u05FF]+|"
                r"[\u0900-\u097F]+|[\uAC00-\uD7AF]+|[\u3040-\u30FF]+(?:[\u4E00-\u9FFF]{0,3})|"
                r"[\u4E00-\u9FFF]{1,3}(?=\s+[\u4E00-\u9FFF\u3040-\u30FF]{1,3}\b))")
_SCRIPT_NAME = rf"(?P<value>{_SCRIPT_WORD}(?:[ \u00A0-]{_SCRIPT_WORD}){{0,2}})"
# what stands before a name in any language the tickets mix in: introductions, greetings, sign-offs,
# titles; and the same in the scripts themselves (меня зовут, с уважением, اسمي, שמי, मेरा नाम, 제 이름은)
_NAME_CUE = (r"(?i:\bmy name is|\bi am|\bi'm|\bthis is|\bname:|\bhi|\bhello|\bhey|\bdear|\bthanks,|"
             r"\bthank you,|\bregards,|\bbest,|\bcheers,|\bsincerely,|\byours,|\bmr\.?|\bmrs\.?|\bms\.?|\bdr\.?|"
             r"\bsigned,|\bfrom:|\bcustomer:|\bcontact:)"
             r"|меня зовут|с уважением,?|здравствуйте,?|привет,?|уважаем(?:ый|ая)|اسمي|مرحبا،?|שמי|שלום,?|"
             r"मेरा नाम|नमस्ते,?|제 이름은|안녕하세요,?|私の名前は|こんにちは、?")
_NAME_AFTER_CUE = re.compile(rf"(?i:{_NAME_CUE})[\s,:]*{_SCRIPT_NAME}")
# a name that signs off: a line of its own after a sign-off line
_SIGNATURE = re.compile(rf"(?im)^(?:regards|best|cheers|thanks|thank you|sincerely|yours|с уважением|спасибо)"
                        rf"[^\n]{{0,20}}\n\s*{_SCRIPT_NAME}\s*$")
# "...と申します" / "...입니다" after a name: Japanese and Korean introductions
_NAME_BEFORE_CUE = re.compile(rf"{_SCRIPT_NAME}\s*(?:と申します|です。|입니다)")


def _capitalised_part(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The leading words of a candidate that read as a name: in a script
    with letter case (Cyrillic, Greek) each word starts with a capital
    ("Здравствуйте, у меня ..." holds no name); scripts without case are
    taken as found."""
    at, kept_end = start, None
    for word in re.finditer(r"\S+", text[start:end]):
        first = word.group()[0]
        if first.lower() != first.upper() and not first.isupper():
            break
        kept_end = start + word.end()
        at = kept_end
    return (start, kept_end) if kept_end is not None and at > start else None


class ScriptNameRecognizer(LocalRecognizer):
    """Names written in another script than the text's (Cyrillic, Greek,
    Arabic, Hebrew, Devanagari, Hangul, Japanese): one to three words after
    a name cue (an introduction, a greeting, a sign-off, a title, in English
    or in the name's own language), a signature line after a sign-off, or
    before a Japanese or Korean self-introduction.  spaCy's English model
    does not read these scripts; the cue is the evidence, so a sentence in
    another language without one ("Ошибка подключения") stays."""

    SCORE = 0.75

    def __init__(self, supported_language: str = "en") -> None:
        super().__init__(supported_entities=["PERSON"], name="script_names", supported_language=supported_language)

    def load(self) -> None:
        pass

    def analyze(self, text: str, entities: list[str], nlp_artifacts: object = None) -> list[RecognizerResult]:
        if text.isascii():
            return []
        found = set()
        for pattern in (_NAME_AFTER_CUE, _SIGNATURE, _NAME_BEFORE_CUE):
            for match in pattern.finditer(text):
                span = _capitalised_part(text, match.start("value"), match.end("value"))
                if span is not None:
                    found.add(span)
        return [RecognizerResult("PERSON", start, end, self.SCORE,
                                 AnalysisExplanation(self.name, self.SCORE, pattern_name="name cue"))
                for start, end in sorted(found)]
