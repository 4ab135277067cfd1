"""Kafka's encoding of dynamic password configs (EncryptingPasswordEncoder), so a password
set with kafka-configs is stored as Kafka stores it in ZooKeeper: encrypted with a key
derived from the brokers' ``password.encoder.secret``, never in clear.

The stored text is Kafka's comma-separated ``name:value`` map::

    keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,keyLength:128,
    salt:<base64 of 256 random bytes>,iterations:4096,encryptedPassword:<base64>,
    passwordLength:<characters>,initializationVector:<base64>

Encoding uses Kafka's defaults (AES/CBC/PKCS5Padding, a 128-bit key, 4096 PBKDF2 iterations
of HMAC-SHA512); decoding honours what the text says, so passwords Kafka wrote with
AES/GCM/NoPadding or PBKDF2WithHmacSHA1 read too. Java's PBEKeySpec feeds PBKDF2 the UTF-8
bytes of the secret, as here.
"""

from __future__ import annotations

import base64
import os

from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

KEY_FACTORY_ALGORITHM = "keyFactoryAlgorithm"
CIPHER_ALGORITHM = "cipherAlgorithm"
KEY_LENGTH = "keyLength"
SALT = "salt"
ITERATIONS = "iterations"
ENCRYPTED_PASSWORD = "encryptedPassword"
PASSWORD_LENGTH = "passwordLength"
INITIALIZATION_VECTOR = "initializationVector"
AUTHENTICATION_TAG_LENGTH = "authenticationTagLength"

CBC = "AES/CBC/PKCS5Padding"
GCM = "AES/GCM/NoPadding"
_HASHES: dict[str, hashes.HashAlgorithm] = {"PBKDF2WithHmacSHA512": hashes.SHA512(), "PBKDF2WithHmacSHA1": hashes.SHA1(),
                                             "PBKDF2WithHmacSHA256": hashes.SHA256()}


class PasswordDecodeError(ValueError):
    """Stored text that is not a password this secret encoded."""


class PasswordEncoder:
    def __init__(self, secret: str, key_length: int = 128, iterations: int = 4096) -> None:
        self._secret = secret.encode("utf-8")
        self.key_length = key_length
        self.iterations = iterations

    def _key(self, factory: str, salt: bytes, key_bits: int, iterations: int) -> bytes:
        algorithm = _HASHES.get(factory)
        if algorithm is None:
            raise PasswordDecodeError(f"unsupported key factory algorithm {factory}")
        return PBKDF2HMAC(algorithm, key_bits // 8, salt, iterations).derive(self._secret)

    def encode(self, password: str) -> str:
        salt, iv = os.urandom(256), os.urandom(16)
        key = self._key("PBKDF2WithHmacSHA512", salt, self.key_length, self.iterations)
        padder = padding.PKCS7(128).padder()
        plain = padder.update(password.encode("utf-8")) + padder.finalize()
        encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
        encrypted = encryptor.update(plain) + encryptor.finalize()
        fields = {KEY_FACTORY_ALGORITHM: "PBKDF2WithHmacSHA512", CIPHER_ALGORITHM: CBC, KEY_LENGTH: str(self.key_length),
                  SALT: _b64(salt), ITERATIONS: str(self.iterations), ENCRYPTED_PASSWORD: _b64(encrypted),
                  PASSWORD_LENGTH: str(_java_length(password)), INITIALIZATION_VECTOR: _b64(iv)}
        return ",".join(f"{name}:{value}" for name, value in fields.items())

    def decode(self, text: str) -> str:
        try:
            fields = dict(item.split(":", 1) for item in text.split(","))
            cipher = fields[CIPHER_ALGORITHM]
            key = self._key(fields.get(KEY_FACTORY_ALGORITHM, "PBKDF2WithHmacSHA512"), base64.b64decode(fields[SALT]),
                            int(fields[KEY_LENGTH]), int(fields[ITERATIONS]))
            encrypted = base64.b64decode(fields[ENCRYPTED_PASSWORD])
            iv = base64.b64decode(fields[INITIALIZATION_VECTOR])
            if cipher == CBC:
                decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
                unpadder = padding.PKCS7(128).unpadder()
                plain = unpadder.update(decryptor.update(encrypted) + decryptor.finalize()) + unpadder.finalize()
            elif cipher == GCM:
                plain = AESGCM(key).decrypt(iv, encrypted, None)
            else:
                raise PasswordDecodeError(f"unsupported cipher {cipher}")
            password = plain.decode("utf-8")
        except PasswordDecodeError:
            raise
        except Exception as exc:  # a wrong secret shows as bad padding, a bad tag, or bad UTF-8
            raise PasswordDecodeError(f"Password could not be decoded: {exc}") from None
        if _java_length(password) != int(fields[PASSWORD_LENGTH]):
            raise PasswordDecodeError("Password could not be decoded, sanity check of length failed")
        return password


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _java_length(text: str) -> int:
    """Java's String.length(): UTF-16 code units, what Kafka stores as passwordLength."""
    return len(text.encode("utf-16-le")) // 2
