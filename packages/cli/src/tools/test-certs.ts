import { execFileSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * PEM files of a throwaway CA, a server certificate for 127.0.0.1/localhost and a client
 * certificate, made with the openssl command (tests, and the benchmark's TLS paths).
 */
export interface TestCerts {
  readonly ca: string;
  readonly serverKey: string;
  readonly serverCert: string;
  readonly clientKey: string;
  readonly clientCert: string;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

/** Generates a CA and certificates it signs with openssl, in `dir`; `tag` makes file names unique. */
export async function makeTestCerts(dir: string, tag = '', clientName = 'admin-client'): Promise<TestCerts> {
  const f = (name: string): string => join(dir, `${tag}${name}`);
  openssl(dir, [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-subj',
    `/CN=visionserve test CA ${tag}`,
    '-keyout',
    f('ca.key'),
    '-out',
    f('ca.pem'),
  ]);
  /** A key and a certificate for `subject` signed by the CA, with the extensions given. */
  const signed = async (name: string, subject: string, extensions: string): Promise<void> => {
    await writeFile(f(`${name}.ext`), extensions);
    openssl(dir, [
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      subject,
      '-keyout',
      f(`${name}.key`),
      '-out',
      f(`${name}.csr`),
    ]);
    openssl(dir, [
      'x509',
      '-req',
      '-in',
      f(`${name}.csr`),
      '-CA',
      f('ca.pem'),
      '-CAkey',
      f('ca.key'),
      '-CAcreateserial',
      '-days',
      '2',
      '-extfile',
      f(`${name}.ext`),
      '-out',
      f(`${name}.pem`),
    ]);
  };
  await signed(
    'server',
    '/CN=localhost',
    'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n',
  );
  await signed('client', `/CN=${clientName}`, 'extendedKeyUsage=clientAuth\n');
  return {
    ca: f('ca.pem'),
    serverKey: f('server.key'),
    serverCert: f('server.pem'),
    clientKey: f('client.key'),
    clientCert: f('client.pem'),
  };
}
