"""The floor under encryption's cost: one message sealed and opened, in
isolation (no database), for :mod:`benchmarks.encryption_cost`.

- AES-GCM alone: ``cryptography``'s ``encrypt``/``decrypt`` of the bytes;
- anvia-django's envelope: the same plus the nonce, the associated data,
  base64 and the envelope's JSON text (what a stored message costs), and
  its base64 decoding alone;
- the Agents SDK's ``EncryptedSession`` item: a Fernet token (AES-CBC and
  HMAC-SHA256, base64) of the JSON bytes.

Medians of 5 runs of 20,000 calls, µs per message, for a short message
and a large one (the sizes of the load workloads).
"""

from __future__ import annotations

import binascii
import json
import os
import statistics
import time
from collections.abc import Callable

from cryptography.fernet import Fernet
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from anvia_django.core.memory.validation import dumps, loads
from anvia_django.encryption.envelope import open_sealed, parse_envelope_text, seal

CALLS = 20_000
SAMPLES = 5


def _per_call(call: Callable[[], object]) -> float:
    times = []
    for _ in range(SAMPLES):
        started = time.perf_counter()
        for _ in range(CALLS):
            call()
        times.append((time.perf_counter() - started) / CALLS * 1e6)
    return statistics.median(times)


def _cells(text: str) -> dict[str, float]:
    data = text.encode()
    cipher = AESGCM(AESGCM.generate_key(bit_length=256))
    nonce = os.urandom(12)
    sealed = cipher.encrypt(nonce, data, b"aad")
    envelope = seal(cipher, 7, 12345, 18, text)
    fernet = Fernet(Fernet.generate_key())
    token = fernet.encrypt(data)

    _, ct = parse_envelope_text(envelope)

    def anvia_open() -> object:
        key_id, ct = parse_envelope_text(envelope)
        return loads(open_sealed(cipher, key_id, ct, 12345, 18))

    return {
        "AES-GCM encrypt": _per_call(lambda: cipher.encrypt(nonce, data, b"aad")),
        "AES-GCM decrypt": _per_call(lambda: cipher.decrypt(nonce, sealed, b"aad")),
        "base64 decoding of the envelope's ciphertext": _per_call(
            lambda: binascii.a2b_base64(ct, strict_mode=True)
        ),
        "anvia seal (envelope)": _per_call(lambda: seal(cipher, 7, 12345, 18, text)),
        "anvia open (envelope + JSON parse)": _per_call(anvia_open),
        "JSON parse alone": _per_call(lambda: loads(text)),
        "Agents SDK Fernet encrypt": _per_call(lambda: fernet.encrypt(data)),
        "Agents SDK Fernet decrypt + JSON parse": _per_call(
            lambda: json.loads(fernet.decrypt(token))
        ),
    }


def floor_lines() -> list[str]:
    """The floor table, as Markdown lines."""
    small = dumps({"role": "assistant", "content": "answer 1 " + "y" * 400})
    large = dumps({"role": "assistant", "content": "answer 1 " + "y" * 3000})
    cells = {len(small): _cells(small), len(large): _cells(large)}
    sizes = list(cells)
    lines = [
        "per message, in isolation: median µs of 5 runs of 20,000",
        "",
        "| operation | " + " | ".join(f"{size:,} B message" for size in sizes) + " |",
        "|---|" + "---:|" * len(sizes),
    ]
    for operation in cells[sizes[0]]:
        row = " | ".join(f"{cells[size][operation]:.2f}" for size in sizes)
        lines.append(f"| {operation} | {row} |")
    return lines


if __name__ == "__main__":
    print("\n".join(floor_lines()))
