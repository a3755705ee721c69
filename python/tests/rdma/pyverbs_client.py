"""The peer of test_pyverbs_peer.py: a client written with rdma-core's pyverbs alone (its own
device context, PD, CQ, QP and landing MR), which decodes pinpool's descriptor with the pure-Python
decoder and RDMA-READs pages of the server's pool. Nothing of pinpool's library is loaded here
(checked at the end). Driven by the server over the socket whose descriptor is argv[1], one JSON
object per line.

Commands: {"op": "connect", "peer": endpoint} (after which the client answers with its own
endpoint), {"op": "read", "descriptor": hex, "pages": [...], "expect": "pattern"|"refused",
"generation": g}; {"op": "read_block", "address", "rkey", "length", "pages": [page], ...} reads one granted block;
"new_qp" makes a fresh QP (an RC QP that saw an error stays in the error state);
"quit" ends. Every answer is {"ok": bool, ...}."""

import json
import random
import socket
import sys

import numpy
import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

import pinpool_descriptor

PORT = 1
SENTINEL = 0xEE


def pattern(page, size, generation):
    """What the server writes into page `page` of generation `generation`."""
    return ((numpy.arange(size, dtype=numpy.uint32) * 7 + page * 131 + generation * 17) % 251
            ).astype(numpy.uint8)


def gid_string(raw):
    return ":".join(raw[i:i + 2].hex() for i in range(0, 16, 2))


class Client:
    def __init__(self):
        self.ctx = Context(name="rxe0")
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 256)
        port = self.ctx.query_port(PORT)
        self.mtu = port.active_mtu
        self.gid_index = next(
            i for i in range(port.gid_tbl_len)
            if self.ctx.query_gid(PORT, i).gid.startswith("0000:0000:0000:0000:0000:ffff:")
            and self.ctx.query_gid_type(PORT, i) == e.IBV_GID_TYPE_SYSFS_ROCE_V2)
        self.gid = self.ctx.query_gid(PORT, self.gid_index)
        self.landing = MR(self.pd, 1 << 20, e.IBV_ACCESS_LOCAL_WRITE)
        self.qp = None

    def new_qp(self):
        if self.qp is not None:
            self.qp.close()
        cap = QPCap(max_send_wr=64, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, cap=cap,
                                         sq_sig_all=1))
        self.psn = random.randrange(1 << 24)
        return {"qp_num": self.qp.qp_num, "psn": self.psn,
                "gid": bytes.fromhex(self.gid.gid.replace(":", "")).hex(), "mtu": int(self.mtu),
                "rd_atomic": 1}

    def connect(self, peer):
        a = QPAttr()
        a.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE
        a.path_mtu = min(int(self.mtu), peer["mtu"])
        a.dest_qp_num = peer["qp_num"]
        a.rq_psn = peer["psn"]
        a.max_dest_rd_atomic = 1
        a.min_rnr_timer = 12
        route = GlobalRoute(dgid=GID(gid_string(bytes.fromhex(peer["gid"]))),
                            sgid_index=self.gid_index)
        a.ah_attr = AHAttr(is_global=1, port_num=PORT, gr=route)
        a.timeout = 18
        a.retry_cnt = 7
        a.rnr_retry = 7
        a.sq_psn = self.psn
        a.max_rd_atomic = 1
        self.qp.to_rts(a)

    def read(self, element):
        """One RDMA READ of `element` into the landing buffer: (status, the bytes landed)."""
        self.landing.write(bytes([SENTINEL]) * element.length, element.length, 0)
        sge = SGE(self.landing.buf, element.length, self.landing.lkey)
        wr = SendWR(opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[sge], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(element.keys[0], element.address)
        self.qp.post_send(wr)
        while True:
            n, wcs = self.cq.poll()
            if n:
                break
        data = numpy.frombuffer(self.landing.read(element.length, 0), dtype=numpy.uint8)
        return wcs[0].status, data


def main():
    sock = socket.socket(fileno=int(sys.argv[1]))
    stream = sock.makefile("r")
    client = Client()

    def answer(**reply):
        sock.sendall((json.dumps(reply) + "\n").encode())

    for line in stream:
        cmd = json.loads(line)
        if cmd["op"] == "new_qp":
            answer(ok=True, endpoint=client.new_qp())
        elif cmd["op"] == "connect":
            client.connect(cmd["peer"])
            answer(ok=True)
        elif cmd["op"] in ("read", "read_block"):
            if cmd["op"] == "read":
                d = pinpool_descriptor.Descriptor.decode(bytes.fromhex(cmd["descriptor"]))
            else:  # one granted block, as (address, rkey, length), holding page pages[0]
                d = {cmd["pages"][0]: pinpool_descriptor.RemoteElement(
                    cmd["address"], cmd["length"], (cmd["rkey"],))}
            results = []
            for page in cmd["pages"]:
                status, data = client.read(d[page])
                if cmd["expect"] == "pattern":
                    good = status == e.IBV_WC_SUCCESS and numpy.array_equal(
                        data, pattern(page, len(data), cmd["generation"]))
                else:  # refused: a remote access error, and not one byte landed
                    good = status == e.IBV_WC_REM_ACCESS_ERR and bool((data == SENTINEL).all())
                results.append({"page": page, "status": int(status), "good": good})
                if cmd["expect"] == "refused":
                    break  # the QP is in the error state now: the server sends new_qp
            answer(ok=all(r["good"] for r in results), results=results)
        elif cmd["op"] == "quit":
            loaded = [m for m in sys.modules if m.startswith("pinpool") and m != "pinpool_descriptor"]
            answer(ok=not loaded, loaded=loaded)
            return


if __name__ == "__main__":
    main()
