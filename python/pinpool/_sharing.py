"""Sharing a pool with other processes, the Python way (docs/python.md, "Sharing").

ShareServer listens on a Unix socket and shares the pool with every process that connects;
Attachment.connect (or pinpool.attach, which keeps one per process and path) is the other end,
and asks for the chunks the pool added since by itself when a handle names one it has not mapped.
Block handles (pinpool.BlockHandle) pickle, so a multiprocessing worker (spawn or forkserver) gets
one as an argument, maps it and writes the block in place.

The protocol on each connection: the server sends the pool (Pool.share) once it accepts; the
attached process sends one byte, b"U", whenever it wants the chunks added since, and the server
answers with Pool.share again. Closing the connection ends the attachment's standing with the
owner (PoolStats sharing.attached_processes).
"""

import os
import socket
import tempfile
import threading
from typing import Optional, Union

from pinpool import _pinpool

PathLike = Union[str, "os.PathLike[str]"]

_UPDATE = b"U"


class Attachment(_pinpool.Attachment):
    """Another process's view of a shared pool (see pinpool._pinpool.Attachment).

    Attachment(sock) receives on a socket the owner called Pool.share on;
    Attachment.connect(path) connects to a ShareServer, and then map() fetches the chunks the
    pool added since (one round trip) when a handle names one not mapped yet.
    """

    _socket: Optional[socket.socket] = None

    @classmethod
    def connect(cls, path: PathLike) -> "Attachment":
        """Connects to the ShareServer at ``path`` and maps the pool's chunks."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(os.fspath(path))
            attachment = cls(sock)
        except BaseException:
            sock.close()
            raise
        attachment._socket = sock
        return attachment

    def update(self, sock: Union[socket.socket, int, None] = None) -> None:
        """Maps the chunks the pool added since: from ``sock`` (after the owner's Pool.share), or
        by asking the ShareServer this attachment connected to."""
        if sock is None:
            if self._socket is None:
                raise _pinpool.FailedPreconditionError(
                    "update(): this attachment was not made by connect(); pass the socket the "
                    "owner shares on")
            sock = self._socket
            sock.sendall(_UPDATE)
        super().update(sock)

    def map(self, handle: _pinpool.BlockHandle) -> _pinpool.Block:
        """The block ``handle`` names, as a Block view of this process's mapping."""
        try:
            return super().map(handle)
        except _pinpool.NotFoundError:
            if self._socket is None:
                raise
            self.update()
            return super().map(handle)

    def close(self) -> None:
        """Unmaps once no view lives, and ends the connection to the ShareServer."""
        super().close()
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def __exit__(self, *exc: object) -> bool:
        self.close()
        return False


_attached: dict = {}
_attached_lock = threading.Lock()


def attach(path: PathLike) -> Attachment:
    """This process's Attachment to the ShareServer at ``path``, made on first use.

    One per process and path (a fork child makes its own: the parent's is not the child's), so a
    worker can call it for every task. For DataLoader workers, call it in worker_init_fn.
    """
    key = (os.getpid(), os.fspath(path))
    with _attached_lock:
        attachment = _attached.get(key)
        if attachment is None or attachment.closed:
            attachment = _attached[key] = Attachment.connect(path)
        return attachment


class ShareServer:
    """Shares ``pool`` with every process that connects to a Unix socket at ``path``.

    ``path`` defaults to a new private directory's ``pool.sock``. A daemon thread accepts; each
    connection gets the pool at once and again whenever it asks (Attachment.update). The pool
    must be file-backed (backing="memfd" or a directory). Close the server (or leave its
    ``with``) before closing the pool.
    """

    def __init__(self, pool: _pinpool.Pool, path: Optional[PathLike] = None) -> None:
        self._pool = pool
        self._own_dir = None
        if path is None:
            self._own_dir = tempfile.mkdtemp(prefix="pinpool-")
            path = os.path.join(self._own_dir, "pool.sock")
        self.path = os.fspath(path)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(64)
        self._connections = []
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="pinpool-share", daemon=True)
        self._thread.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._connections.append(conn)
            threading.Thread(target=self._serve, args=(conn,), name="pinpool-share-conn",
                             daemon=True).start()

    def _serve(self, conn):
        try:
            self._pool.share(conn)
            while conn.recv(1) == _UPDATE:
                self._pool.share(conn)
        except (OSError, _pinpool.PinpoolError):
            pass  # the attached process went away, or the pool closed
        finally:
            with self._lock:
                if conn in self._connections:
                    self._connections.remove(conn)
            conn.close()

    def close(self) -> None:
        """Stops accepting, closes every connection and removes the socket."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            connections = list(self._connections)
        self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        if self._own_dir is not None:
            os.rmdir(self._own_dir)

    def __enter__(self) -> "ShareServer":
        return self

    def __exit__(self, *exc: object) -> bool:
        self.close()
        return False
