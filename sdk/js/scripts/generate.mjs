// Copies the API contract (proto/airlock/v1/airlock.proto at the repository's root) into this
// package, which loads it at run time, and generates its TypeScript types (src/generated/) with
// @grpc/proto-loader's generator, using the same loader options as src/rpc.ts.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const source = path.join(here, '..', '..', 'proto', 'airlock', 'v1', 'airlock.proto');
const target = path.join(here, 'proto', 'airlock', 'v1', 'airlock.proto');
fs.mkdirSync(path.dirname(target), { recursive: true });
fs.copyFileSync(source, target);
fs.rmSync(path.join(here, 'src', 'generated'), { recursive: true, force: true });
execFileSync(path.join(here, 'node_modules', '.bin', 'proto-loader-gen-types'), [
  'airlock/v1/airlock.proto', '--longs=Number', '--enums=String', '--defaults', '--oneofs',
  '--includeComments', '--grpcLib=@grpc/grpc-js', '--importFileExtension=.js',
  '--outDir=' + path.join(here, 'src', 'generated'), '--includeDirs', path.join(here, 'proto'),
], { stdio: 'inherit' });
