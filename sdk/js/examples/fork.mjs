// Forks a session and shows that each copy goes its own way from the same state.
// `node examples/fork.mjs [SOCKET]`, after `npm run build`.
import { Client } from '@airlock/sdk';

const client = await Client.connect(process.argv[2]);
try {
  await client.withSession({}, async (session) => {
    await session.files.write('/root/state', 'before the fork\n');
    const kids = await session.fork(2);  // each with its own disk, id and hostname
    try {
      for (const [i, kid] of kids.entries()) {
        const r = await kid.exec(['sh', '-c', `echo copy ${i} >> /root/state; cat /root/state`]);
        process.stdout.write(`${kid.id} (${kid.info.hostname}):\n${r.stdout}`);
      }
      const r = await session.exec(['cat', '/root/state']);
      process.stdout.write(`${session.id} (the original):\n${r.stdout}`);
    } finally {
      for (const kid of kids) await kid.remove();
    }
  });
} finally {
  client.close();
}
