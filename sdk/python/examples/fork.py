"""Forks a session and shows that each copy goes its own way from the same state: the copies
run at once, with asyncio.

    PYTHONPATH=sdk/python python3 sdk/python/examples/fork.py [SOCKET]
"""
import asyncio
import sys

import airlock.aio


async def main() -> None:
    address = sys.argv[1] if len(sys.argv) > 1 else None
    async with airlock.aio.Client(address) as client:
        async with client.session() as session:
            await session.files.write("/root/state", b"before the fork\n")
            kids = await session.fork(2)
            try:
                results = await asyncio.gather(*(
                    kid.exec(["sh", "-c", f"echo copy {i} >> /root/state; cat /root/state"])
                    for i, kid in enumerate(kids)))
                for kid, r in zip(kids, results):
                    print(f"{kid.id} ({kid.info.hostname}):\n{r.stdout.decode(errors='replace')}",
                          end="")
                r = await session.exec(["cat", "/root/state"])
                print(f"{session.id} (the original):\n{r.stdout.decode(errors='replace')}", end="")
            finally:
                for kid in kids:
                    await kid.remove()


if __name__ == "__main__":
    asyncio.run(main())
