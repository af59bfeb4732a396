"""Run a program in a network namespace of its own that reaches one TCP port of the host's
loopback, and nothing else.

For operators whose listeners cannot be bound to 127.0.0.1 by a flag (Argo's
workflow-controller serves ``:6060`` and its metrics on every interface): inside the
namespace only a loopback device exists, so whatever it listens on is reachable from nowhere
but itself. The API server is reached through two relays joined by a Unix socket (a file,
which crosses network namespaces): ``host`` accepts on the socket and connects to the host's
127.0.0.1:PORT; ``jail`` (run under ``unshare --net``) brings ``lo`` up, listens on its own
127.0.0.1:PORT, starts the program, relays each connection to the socket, and exits with the
program's status; SIGTERM is passed on. TLS goes through untouched, so the kubeconfig's
``https://127.0.0.1:PORT`` and the server certificate are the same inside and out.

    python netjail.py host SOCKET PORT
    unshare --net python netjail.py jail SOCKET PORT -- PROGRAM ARGS...
"""

from __future__ import annotations

import asyncio
import fcntl
import signal
import socket
import struct
import sys

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def _join(
    client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    server: tuple[asyncio.StreamReader, asyncio.StreamWriter],
) -> None:
    await asyncio.gather(_pipe(client[0], server[1]), _pipe(server[0], client[1]))


async def host(path: str, port: int) -> None:
    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            writer.close()
            return
        await _join((reader, writer), upstream)

    server = await asyncio.start_unix_server(accept, path)
    async with server:
        await server.serve_forever()


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, request)[:18])[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))


async def jail(path: str, port: int, argv: list[str]) -> int:
    _loopback_up()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream = await asyncio.open_unix_connection(path)
        except OSError:
            writer.close()
            return
        await _join((reader, writer), upstream)

    server = await asyncio.start_server(accept, "127.0.0.1", port)
    program = await asyncio.create_subprocess_exec(*argv)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, program.send_signal, sig)
    async with server:
        return await program.wait()


def main(args: list[str]) -> int:
    mode, path, port = args[0], args[1], int(args[2])
    if mode == "host":
        asyncio.run(host(path, port))
        return 0
    if mode == "jail" and args[3:4] == ["--"] and args[4:]:
        return asyncio.run(jail(path, port, args[4:]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
