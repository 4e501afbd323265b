#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
# Check a tshark field dump (tests/verbs_wire.sh) of one RC conversation
# between two npf devices: every UDP/4791 datagram decoded as InfiniBand
# with an RC opcode, the right headers for it, each sender's request PSNs in
# sequence (retransmissions may go back, never skip), each response PSN one
# the other side asked for, and the client's first PSN the one it printed.
# usage: verbs_wire_check.py DUMP MTU CLIENT_IP CLIENT_PSN OPCODE...
import sys

dump, mtu, cli_ip, cli_psn = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4], 0)
want_ops = set(int(o, 0) for o in sys.argv[5:])
REQ = {0x00, 0x01, 0x02, 0x04, 0x06, 0x07, 0x08, 0x0a, 0x0c}
RESP = {0x0d, 0x0e, 0x0f, 0x10, 0x11}
RETH = {0x06, 0x0a, 0x0c}
AETH = {0x0d, 0x0f, 0x10, 0x11}
M = 1 << 24

fail = []
expect = {}   # src ip -> next request PSN
first = {}    # src ip -> first request PSN
asked = {}    # src ip -> set of PSNs it asked for (request PSNs, READ response PSNs)
seen_ops = set()
n = 0
for line in open(dump):
    f = line.rstrip('\n').split('\t')
    frame, src, udp, op, qp, psn, reth_len, aeth = (f + [''] * 8)[:8]
    if udp != '4791':
        continue
    n += 1
    if op == '':
        fail.append(f'frame {frame}: UDP/4791 datagram not decoded as InfiniBand')
        continue
    op, psn = int(op), int(psn)
    seen_ops.add(op)
    if op not in REQ | RESP:
        fail.append(f'frame {frame}: opcode {op:#x} is not an RC opcode the NIC sends')
        continue
    if (op in RETH) != (reth_len != ''):
        fail.append(f'frame {frame}: opcode {op:#x} with{"out" if op in RETH else ""} a RETH')
    if (op in AETH) != (aeth != ''):
        fail.append(f'frame {frame}: opcode {op:#x} with{"out" if op in AETH else ""} an AETH')
    if op in REQ:
        if src not in first:
            first[src] = psn
            expect[src] = psn
        d = (psn - expect[src]) % M
        if d != 0 and d < M // 2:
            fail.append(f'frame {frame}: {src} request PSN {psn:#x} skips ahead of {expect[src]:#x}')
        npk = 1
        if op == 0x0c:
            npk = max(1, (int(reth_len, 0) + mtu - 1) // mtu)
        s = asked.setdefault(src, set())
        for i in range(npk):
            s.add((psn + i) % M)
        if d == 0:
            expect[src] = (psn + npk) % M
    else:
        # a response goes to the other side: its PSN must be one that side asked for
        others = [ip for ip in asked if ip != src]
        if not any(psn in asked[ip] for ip in others):
            fail.append(f'frame {frame}: response opcode {op:#x} PSN {psn:#x} answers no request')

if n == 0:
    fail.append('no UDP/4791 datagram captured')
if cli_ip not in first:
    fail.append(f'no request from the client {cli_ip}')
elif first[cli_ip] != cli_psn:
    fail.append(f'the client\'s first request PSN is {first[cli_ip]:#x}, it printed {cli_psn:#x}')
missing = want_ops - seen_ops
if missing:
    fail.append('opcodes never seen: ' + ' '.join(f'{o:#x}' for o in sorted(missing)))
print(f'{n} packets, opcodes ' + ' '.join(f'{o:#x}' for o in sorted(seen_ops)))
for m in fail[:20]:
    print('FAIL:', m)
sys.exit(1 if fail else 0)
