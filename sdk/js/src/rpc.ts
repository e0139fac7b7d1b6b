// The API's stubs, from the proto this package carries (loaded once, at first use), with the
// same loader options its generated types (src/generated) were made with.
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ProtoGrpcType } from './generated/airlock.js';

let loaded: ProtoGrpcType | undefined;

export function api(): ProtoGrpcType {
  if (!loaded) {
    const root = path.join(path.dirname(path.dirname(fileURLToPath(import.meta.url))), 'proto');
    const definition = protoLoader.loadSync('airlock/v1/airlock.proto', {
      includeDirs: [root],
      longs: Number,
      enums: String,
      defaults: true,
      oneofs: true,
    });
    loaded = grpc.loadPackageDefinition(definition) as unknown as ProtoGrpcType;
  }
  return loaded;
}
