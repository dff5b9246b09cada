"""The worker's seccomp filter as data: its classic-BPF program run on a small interpreter for each architecture it
supports, so aarch64's numbers are checked on any machine (the real filter on this machine is
tests/sandbox/test_hostile.py's)."""

from __future__ import annotations

import struct

import pytest

from azr.sandbox import worker

X86_64, AARCH64, I386 = 0xC000003E, 0xC00000B7, 0x40000003
ALLOW, EPERM = 0x7FFF0000, 0x00050001


def verdict(program: bytes, arch: int, nr: int) -> int:
    """What the filter returns for a call `nr` of `arch` (seccomp_data: nr at offset 0, arch at 4)."""
    insns = [struct.unpack("HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    data, acc, pc = {0: nr, 4: arch}, 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            acc = data[k]
        elif code == 0x06:
            return k
        elif code in (0x15, 0x35):
            pc += jt if (acc == k if code == 0x15 else acc >= k) else jf
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
        pc += 1


@pytest.mark.parametrize(("arch", "keys", "mq_open", "getpid"), [(X86_64, (248, 249, 250), 240, 39),
                                                                  (AARCH64, (217, 218, 219), 180, 172)])  # fmt: skip
def test_the_filter_refuses_keyring_calls_and_mq_open_only_where_asked(arch, keys, mq_open, getpid):
    for private_mqueue in (True, False):
        program = worker.seccomp_filter(arch, worker.denied_calls(private_mqueue))
        assert [verdict(program, arch, nr) for nr in keys] == [EPERM] * 3
        assert verdict(program, arch, mq_open) == (ALLOW if private_mqueue else EPERM)
        assert verdict(program, arch, getpid) == ALLOW
        assert verdict(program, I386, 286) == EPERM  # another ABI (i386's add_key through int 0x80)
    if arch == X86_64:
        assert verdict(program, arch, 0x40000000 | keys[0]) == EPERM  # x32's add_key
