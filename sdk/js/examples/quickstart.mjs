// Creates a session, runs a command in it, prints its output and exit code, and removes the
// session. `node examples/quickstart.mjs [SOCKET]` (default: $AIRLOCK_SOCKET, else
// /run/airlock/airlockd.sock), after `npm run build`.
import { Client } from '@airlock/sdk';

const client = await Client.connect(process.argv[2]);
try {
  const session = await client.createSession();
  console.log(`session ${session.id} is ${session.state}`);
  let result;
  try {
    result = await session.exec(['sh', '-c', 'echo hello from $(hostname)']);
  } finally {
    await session.remove();  // whatever the command did
  }
  process.stdout.write(result.stdout);
  console.log(`exit code ${result.exitCode}`);
} finally {
  client.close();
}
