"""Dynamic password configs are encoded as Kafka's EncryptingPasswordEncoder encodes them:
texts written by Kafka 3.9.1 (the two below, made with its kafka-server-common jar, secret
"kafka-secret") decode here, and what Castle writes has Kafka's fields and decodes again;
a wrong secret or a damaged text is refused, never decoded into something else."""

from __future__ import annotations

import pytest

from broker.security.password_encoder import PasswordDecodeError, PasswordEncoder

KAFKA_CBC = "initializationVector:Fi3x3ILf2ummTvsYNZMEmw==,keyLength:128,salt:MK+sFzmZaBcyXH4gPSmWEltUT/Vrmd+etk8mp3/HohzFfOV8ikU71pvKgGJdjAu43DB/BiX77kdGvsQxTmzpaqiNmn295JbkcOwfPH0bWEiAei5+uEhx2H73nbEV/kbyc+41kGwbjaodrgLPhaj0HtQSZ37k4gbPRFQbo02j0kZqhoLxNbI5l9GYmKcjQiZiKHZ0A4QjYMLif6BVq/pq79bqkAJ272Y0oDmCtLbWgLcKzcA82jXXnCrWKg8MOYoom3PgncQAQ9LF2KXOxiWN1jtHDpy9jWRSRgDuSiTxzlKjct2fHrUose7CMsK0VNyf/ife0RM+C0AOF0M/YYmZcA==,keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,iterations:4096,passwordLength:8,encryptedPassword:nsSWxymaSOkW4uGMf6btug=="
KAFKA_GCM = "initializationVector:bGgoOq9/7P/TB0p2,keyLength:128,salt:GkYLwkunNHQrFBj26SzoIg4F4+WdYTbgrggDvtSSNZCOZCUP1Xemu435dIyiMTWCWBo0t8U7nqkivoDmFtKOeTLfchrjqcLT6H5DvCY5BsS106aoOjX4DPSsnpA/MxOBnaq/BCa2sJQmrOMch+yJ370Ufspgw/1WgZuKll/f/ywE8d4dEnc77z97zQzaqqMuyiDfYoKYWhK+BDwm6mxsB5RS0ydDiD9GPTsyBP/hNypHX9TY9Ga0tiLqvo2yRotCYq5rhyfNP8ONR95C7Ws+HUyvtxxSNl+rKQlehtfKdBictRqWIuO7d+LwWpQ3T1JXzPCwD2aoT9w4M7pQt0FyIw==,keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/GCM/NoPadding,authenticationTagLength:128,iterations:4096,passwordLength:8,encryptedPassword:4/5ZWz9uGKasHDscSrP/IPKQXAzNSU+Y"


def test_texts_kafka_wrote_decode() -> None:
    encoder = PasswordEncoder("kafka-secret")
    assert encoder.decode(KAFKA_CBC) == "key-pass"
    assert encoder.decode(KAFKA_GCM) == "key-pass"


def test_castles_text_has_kafkas_fields_and_round_trips() -> None:
    encoder = PasswordEncoder("kafka-secret")
    text = encoder.encode("pässwörd\U0001F600")
    fields = dict(item.split(":", 1) for item in text.split(","))
    assert {k: fields[k] for k in ("keyFactoryAlgorithm", "cipherAlgorithm", "keyLength", "iterations",
                                   "passwordLength")} == {
        "keyFactoryAlgorithm": "PBKDF2WithHmacSHA512", "cipherAlgorithm": "AES/CBC/PKCS5Padding", "keyLength": "128",
        "iterations": "4096", "passwordLength": "10"}  # Java's length: the emoji is two UTF-16 units
    assert "pässwörd" not in text
    assert encoder.decode(text) == "pässwörd\U0001F600"
    assert encoder.encode("same") != encoder.encode("same")  # a fresh salt and IV each time


def test_a_wrong_secret_or_damaged_text_is_refused() -> None:
    text = PasswordEncoder("kafka-secret").encode("key-pass")
    with pytest.raises(PasswordDecodeError):
        PasswordEncoder("another-secret").decode(KAFKA_GCM)
    with pytest.raises(PasswordDecodeError):
        PasswordEncoder("kafka-secret").decode(text.replace("passwordLength:8", "passwordLength:9"))
    with pytest.raises(PasswordDecodeError):
        PasswordEncoder("kafka-secret").decode("key-pass")  # clear text is not an encoded password
