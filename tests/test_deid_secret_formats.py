"""Secret formats that survived ingest (issue 26 item 3): provider tokens
(Twilio, Shopify, DigitalOcean, Azure Service Bus), session cookies, PuTTY
and PGP private keys, passwords on a command line, "api key: ..." with a
space and "password" in other languages; each in free text, in a JSON tool
result and in a header, and each found again by the audit (which reuses the
ingest's secret recognizer)."""

from __future__ import annotations

import json
from urllib.parse import unquote

import pytest

from cirrus.audit import scan_text
from cirrus.schema import Event, SourceRef, Ticket

# an Azure identifiable key: 33 base64 characters, the service's signature ("+ASb": Service Bus), then 6
_AZURE_SB_KEY = "Qm3vT8kP2xW7nR4jL9sF6hD1gB5cZ0yA3" + "+ASb" + "G7kQ2m="
_PUTTY = ("PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: eddsa-key-20240312\nPublic-Lines: 2\n"
          "AAAAC3NzaC1lZDI1NTE5AAAAIGk7Qm3vT8kP2xW7nR4jL9sF6hD1gB5cZ0yA\nPrivate-Lines: 1\n"
          "AAAAIH3kQm9vT2xP7nW4jR9sL6fD1hB5gZ0cA3yQm3vT\nPrivate-MAC: 6f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6")
_PGP = ("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGX1a2sBCAC7kL9mN3pQ5rS7tU9vW1xY3zA5bC7dE9fG1hJ3kL5mN7pQ9rS\n"
        "=Ab3d\n-----END PGP PRIVATE KEY BLOCK-----")

# (sentence holding the secret, the secret)
SECRETS = {
    "twilio_sk": ("the twilio key SK2b8c3d4e5f60718293a4b5c6d7e8f901 was rotated", "SK2b8c3d4e5f60718293a4b5c6d7e8f901"),
    "twilio_ac": ("Twilio account AC0f1e2d3c4b5a69788796a5b4c3d2e1f0 is blocked", "AC0f1e2d3c4b5a69788796a5b4c3d2e1f0"),
    "twilio_auth": ("TWILIO_AUTH_TOKEN=9f8e7d6c5b4a39281706f5e4d3c2b1a0", "9f8e7d6c5b4a39281706f5e4d3c2b1a0"),
    "shopify_pat": ("our shopify token 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 stopped working",
                    "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"),
    "shopify_ss": ("app secret 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 leaked", "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"),
    "shopify_ca": ("custom app 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 please", "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"),
    "digitalocean_pat": ("DO token dop_v1_3f9c2a7b1e5d4c8f0a6b2e9d7c3f1a5b8e0d4c6f2a9b7e1d3c5f8a0b2e4d6c9f1a ok?",
                         "dop_v1_3f9c2a7b1e5d4c8f0a6b2e9d7c3f1a5b8e0d4c6f2a9b7e1d3c5f8a0b2e4d6c9f1a"),
    "digitalocean_oauth": ("use doo_v1_c4f2a9b7e1d3c5f8a0b2e4d6c9f1a3f9c2a7b1e5d4c8f0a6b2e9d7c3f1a5b8e0d",
                           "doo_v1_c4f2a9b7e1d3c5f8a0b2e4d6c9f1a3f9c2a7b1e5d4c8f0a6b2e9d7c3f1a5b8e0d"),
    "azure_service_bus": (f"Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={_AZURE_SB_KEY}",
                          _AZURE_SB_KEY),
    "azure_identifiable": (f"the queue key {_AZURE_SB_KEY} leaked in a screenshot", _AZURE_SB_KEY),
    "azure_legacy": ("conn acme.servicebus.windows.net key=Xy7Qk2Lm9Np4Rs6Tv8Wx0Za1Bc3De5Fg7Hi9Jk2Lm4abc=",
                     "Xy7Qk2Lm9Np4Rs6Tv8Wx0Za1Bc3De5Fg7Hi9Jk2Lm4abc="),
    "cookie_php": ("my browser sends PHPSESSID=k2j3h4g5f6d7s8a9q0w1e2r3t4 each time", "k2j3h4g5f6d7s8a9q0w1e2r3t4"),
    "cookie_java": ("JSESSIONID=9A8B7C6D5E4F3A2B1C0D9E8F7A6B5C4D; Path=/app", "9A8B7C6D5E4F3A2B1C0D9E8F7A6B5C4D"),
    "cookie_express": ("cookie connect.sid=s%3AaB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW.xYz123 expired",
                       "s%3AaB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW.xYz123"),
    "cookie_laravel": ("laravel_session=eyJpdiI6IkRrd3pKN3Vv2c1b9a", "eyJpdiI6IkRrd3pKN3Vv2c1b9a"),
    "putty": (f"here is my key file:\n{_PUTTY}\nthanks", "AAAAIH3kQm9vT2xP7nW4jR9sL6fD1hB5gZ0cA3yQm3vT"),
    "pgp": (f"my key:\n{_PGP}\n", "lQOYBGX1a2sBCAC7kL9mN3pQ5rS7tU9vW1xY3zA5bC7dE9fG1hJ3kL5mN7pQ9rS"),
    "openssh": ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB\n"
                "-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB"),
    "sshpass": ("I ran sshpass -p Tr0ub4dor ssh root@10.0.0.5", "Tr0ub4dor"),
    "sshpass_quoted": ("sshpass -p 'hunter22' scp dump.sql host:", "hunter22"),
    "mysql": ("mysql -u root -pS3cretPass -h db.internal shop", "S3cretPass"),
    "mysqldump": ("mysqldump -uadmin -pKx9vQ2z shop > dump.sql", "Kx9vQ2z"),
    "password_flag": ("./tool --password Hunter2x --verbose", "Hunter2x"),
    "password_flag_eq": ("./deploy.sh --password=correcthorse42", "correcthorse42"),
    "curl_user": ("curl -u admin:P4ssw0rd https://api.example.net/x", "P4ssw0rd"),
    "curl_user_long": ("curl --user bob:letmein99 https://api.example.net/x", "letmein99"),
    "api_key_space": ("my api key: 9f8e7d6c5b4a3928", "9f8e7d6c5b4a3928"),
    "api_key_is": ("the API key is AbCdEf123456789", "AbCdEf123456789"),
    "passwort": ("Passwort: Geheim123", "Geheim123"),
    "passwort_ist": ("mein Passwort ist Sommer2024!", "Sommer2024!"),
    "contrasena": ("mi contraseña: Clave2024", "Clave2024"),
    "contrasena_es": ("la contraseña es Madrid#77", "Madrid#77"),
    "mot_de_passe": ("mot de passe : Soleil99", "Soleil99"),
    "senha": ("senha: Brasil2024", "Brasil2024"),
    "wachtwoord": ("wachtwoord: Tulp1234!", "Tulp1234!"),
    "parol": ("пароль: Qwerty123", "Qwerty123"),
    "haslo": ("hasło: Zaq12wsx", "Zaq12wsx"),
    "password_ja": ("パスワード：abc12345", "abc12345"),
    "password_it": ("la password è Roma2023", "Roma2023"),
}


def _found(spans, text: str, value: str) -> bool:
    at = text.find(value)
    return any(sp.entity == "SECRET" and sp.start <= at and sp.end >= at + len(value) for sp in spans)


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_found_in_text(deidentifier, kind):
    text, secret = SECRETS[kind]
    spans = deidentifier.detect(text)
    assert _found(spans, text, secret), [(text[s.start:s.end], s.entity) for s in spans]


def _ticket(content: object) -> Ticket:
    return Ticket(ticket_id="T-S", origin=SourceRef("x.jsonl", line=1), events=[
        Event("customer", "It stopped working, can you check?"),
        Event("tool_call", call_id="c1", name="GetLogs", arguments={"service": "web"}),
        Event("tool_result", call_id="c1", content=content)])


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_masked_in_a_json_tool_result(deidentifier, kind):
    text, secret = SECRETS[kind]
    clean, _ = deidentifier.deidentify(_ticket({"log": [{"line": 1, "message": text}], "status": "ok"}))
    dumped = json.dumps(clean.events[2].content, ensure_ascii=False)
    assert secret not in dumped and json.dumps(secret, ensure_ascii=False)[1:-1] not in dumped
    assert clean.events[2].content["status"] == "ok"


HEADERS = {
    "cookie": ("Cookie", "theme=dark; PHPSESSID=k2j3h4g5f6d7s8a9q0w1e2r3t4; lang=en", "k2j3h4g5f6d7s8a9q0w1e2r3t4"),
    "set_cookie": ("Set-Cookie", "JSESSIONID=9A8B7C6D5E4F3A2B1C0D9E8F7A6B5C4D; Path=/; HttpOnly",
                   "9A8B7C6D5E4F3A2B1C0D9E8F7A6B5C4D"),
    "shopify": ("X-Shopify-Access-Token", "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", "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"),
    "digitalocean": ("Authorization", "Bearer dop_v1_3f9c2a7b1e5d4c8f0a6b2e9d7c3f1a5b8e0d4c6f2a9b7e1d3c5f8a0b2e4d6c9f1a",
                     "dop_v1_3f9c2a7b1e5d4c8f0a6b2e9d7c3f1a5b8e0d4c6f2a9b7e1d3c5f8a0b2e4d6c9f1a"),
    "azure": ("ServiceBusSupplementaryAuthorization", f"SharedAccessSignature sr=x&sig=1&skn=Root&key={_AZURE_SB_KEY}",
              _AZURE_SB_KEY),
}


@pytest.mark.parametrize("kind", sorted(HEADERS))
def test_masked_in_headers(deidentifier, kind):
    name, value, secret = HEADERS[kind]
    clean, _ = deidentifier.deidentify(_ticket({"request": {"headers": {name: value, "Accept": "application/json"}}}))
    dumped = json.dumps(clean.events[2].content)
    assert secret not in dumped and "application/json" in dumped
    # a raw header block in a message
    text = f"GET /admin HTTP/1.1\nHost: shop.example.net\n{name}: {value}\nAccept: */*"
    assert _found(deidentifier.detect(text), text, secret)


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_the_audit_finds_the_same(kind):
    text, secret = SECRETS[kind]
    at = text.find(secret)
    hits = scan_text(text)
    # the secret itself (a hit's value is the value as read: %XX decoded), or the armour header of
    # the key block that holds it
    assert any(h.start <= at and (h.start + len(h.value) >= at + len(secret) or unquote(secret) in h.value)
               or (h.kind == "key" and h.value.startswith("-----BEGIN")) for h in hits), hits


@pytest.mark.parametrize("text", [
    "the test_helpers_for_the_checkout_module_are_flaky",          # snake_case, no random tail
    "see docs_v1_introduction_to_the_platform_and_its_services",    # a long name, not a token
    "session expired, please log in again",                          # the word session
    "the session id is shown in the console",
    "Passwort vergessen? Klicken Sie hier",                          # "forgot password?"
    "la contraseña es incorrecta",                                    # "the password is wrong"
    "PuTTY cannot load the key file",
    "mysql -u root -p shop < dump.sql",                               # -p alone prompts
    "order 12345678 shipped via UPS, 2 items, $19.99",
])
def test_ordinary_text_keeps_its_words(deidentifier, text):
    assert not [s for s in deidentifier.detect(text) if s.entity == "SECRET"]
