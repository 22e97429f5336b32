"""An envelope's text is parsed by slicing (anvia_django/encryption/envelope.py):
anything but the exact form the store writes fails loudly, as it did when a
regular expression matched it."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from anvia_django.encryption.envelope import (
    DecryptionError,
    open_sealed,
    parse_envelope_text,
    seal,
)

CIPHER = AESGCM(bytes(range(32)))


def test_the_form_the_store_writes_opens() -> None:
    envelope = seal(CIPHER, 7, 12, 3, '{"role":"user","content":"hi"}')
    key_id, ct = parse_envelope_text(envelope)
    assert key_id == 7
    assert open_sealed(CIPHER, key_id, ct, 12, 3) == '{"role":"user","content":"hi"}'


def test_an_envelope_carrying_blind_index_tokens_opens() -> None:
    envelope = seal(CIPHER, 7, 12, 3, '{"role":"user","content":"hi"}')
    carried = f'{envelope[:-1]},"content":"0a1b2c 3d4e5f"}}'
    assert opened(carried) == '{"role":"user","content":"hi"}'


@pytest.mark.parametrize(
    "text",
    [
        '{"anvia_enc":1,"dk":7,"ct":"AAAA"',
        '{"anvia_enc":2,"dk":7,"ct":"AAAA"}',
        '{"anvia_enc":1,"dk":-7,"ct":"AAAA"}',
        '{"anvia_enc":1,"dk":"7","ct":"AAAA"}',
        '{"anvia_enc":1,"dk":,"ct":"AAAA"}',
        '{"anvia_enc":1,"dk":\u0667,"ct":"AAAA"}',
        '{"anvia_enc":1,"dk":7,"ct":"AAAA","x":1}',
        '{"anvia_enc":1,"ct":"AAAA","dk":7}',
        ' {"anvia_enc":1,"dk":7,"ct":"AAAA"}',
        '{"anvia_enc":1,"dk":7,"ct":"AAAA","content":"0a1b XYZ"}',
        '{"anvia_enc":1,"dk":7,"ct":"AAAA","content":"0a1b","x":"1"}',
        '{"anvia_enc":1,"dk":7,"ct":"AAAA","content":0}',
    ],
)
def test_another_form_is_refused(text: str) -> None:
    with pytest.raises(DecryptionError, match="unknown form"):
        parse_envelope_text(text)


@pytest.mark.parametrize("inserted", ["!", "\n", " ", '","x":"'])
def test_a_character_outside_base64_in_the_ciphertext_fails(inserted: str) -> None:
    # Lenient base64 decoding would skip such characters and decrypt.
    envelope = seal(CIPHER, 7, 12, 3, '{"role":"user","content":"hi"}')
    _, ct = parse_envelope_text(envelope)
    tampered = envelope.replace(ct, ct[:8] + inserted + ct[8:])
    with pytest.raises(DecryptionError):
        opened(tampered)


def opened(envelope: str) -> str:
    key_id, ct = parse_envelope_text(envelope)
    return open_sealed(CIPHER, key_id, ct, 12, 3)
