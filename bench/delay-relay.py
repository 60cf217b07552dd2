#!/usr/bin/env python3
"""A TCP relay that adds a delay and a rate limit, for benchmarks on a
kernel without sch_netem (tc's delay needs it).

    delay-relay.py LISTEN_PORT TARGET_PORT DELAY_MS [RATE_BITS_PER_S]

Listens on 127.0.0.1:LISTEN_PORT and connects each client to
127.0.0.1:TARGET_PORT. Every chunk read in either direction is passed on
DELAY_MS later, so a request and its answer take 2 x DELAY_MS more: a
round trip time of twice the delay, as netem's "delay" on a loopback.
With a rate, the answers of all connections together go out at most at
that many bits a second (the chunks queue behind each other, as behind
one slow link that every connection shares).
"""
import asyncio
import sys

CHUNK = 64 << 10


class Link:
    """One direction of the link: when it is free again, at @rate bytes a
    second (0: unpaced)."""

    def __init__(self, rate):
        self.rate = rate
        self.free = 0.0


async def pipe(reader, writer, delay, link):
    """Copy @reader to @writer, each chunk @delay seconds late, paced by
    @link, which other connections share."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()
    rate = link.rate

    async def send():
        while True:
            due, data = await queue.get()
            if not data:
                break
            start = max(due, link.free)
            if rate:
                link.free = start + len(data) / rate
            wait = (link.free if rate else start) - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        writer.close()

    sender = asyncio.ensure_future(send())
    try:
        while True:
            data = await reader.read(CHUNK)
            queue.put_nowait((loop.time() + delay, data))
            if not data:
                break
    except ConnectionError:
        queue.put_nowait((0, b""))
    try:
        await sender
    except ConnectionError:
        pass


async def main():
    listen, target = int(sys.argv[1]), int(sys.argv[2])
    delay = float(sys.argv[3]) / 1000
    rate = float(sys.argv[4]) / 8 if len(sys.argv) > 4 else 0.0
    up, down = Link(0.0), Link(rate)

    async def client(cr, cw):
        try:
            sr, sw = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            cw.close()
            return
        await asyncio.gather(pipe(cr, sw, delay, up),
                             pipe(sr, cw, delay, down))

    server = await asyncio.start_server(client, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
