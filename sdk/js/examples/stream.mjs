// Streams a long command's output as it comes, and says how it ended.
// `node examples/stream.mjs [SOCKET]`, after `npm run build`.
import { Client } from '@airlock/sdk';

const client = await Client.connect(process.argv[2]);
try {
  await client.withSession({}, async (session) => {  // removed when the function ends
    const script = 'for i in 1 2 3 4 5; do echo step $i; sleep 0.5; done; echo done >&2';
    for await (const event of session.execStream(['sh', '-c', script])) {
      if (event.type === 'stdout') process.stdout.write(event.data);
      else if (event.type === 'stderr') process.stderr.write(event.data);
      else console.log(`exit code ${event.exitCode}`);
    }
  });
} finally {
  client.close();
}
