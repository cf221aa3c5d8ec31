// Starts brasa-server on a free loopback port over a temporary folder of fixture models,
// and stops it. Used by the browser and openai-client tests.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const build = process.env.BUILD || 'build';
export const serverBin = path.resolve(root, build, 'brasa-server');
const shared = path.resolve(root, process.env.BRASA_SHARED || '../shared');
export const fixtures = ['qwen2.Q8_0.gguf', 'llama.Q8_0.gguf'].map((f) => path.join(shared, 'fixtures', f));

// A model whose text reads as English, for the dashboard's picture (optional).
export const stories = path.join(shared, 'models', 'stories260K.gguf');

export function inputsMissing() {
  if (!fs.existsSync(serverBin)) return `${serverBin} is missing (make server)`;
  for (const f of fixtures) if (!fs.existsSync(f)) return `${f} is missing`;
  return null;
}

// opts: { delayMs, apiKey, stories (start on stories260K when present) }. Resolves to { url, port, proc, stop(), dir }.
export function startServer(opts = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'brasa-web-models-'));
  const files = [...fixtures];
  if (opts.stories && fs.existsSync(stories)) files.push(stories);
  for (const f of files) fs.symlinkSync(f, path.join(dir, path.basename(f)));
  const first = opts.stories && fs.existsSync(stories) ? stories : fixtures[0];
  const args = ['--port', '0', '-t', '1', '-m', path.join(dir, path.basename(first)), '--models-dir', dir];
  if (opts.apiKey) args.push('--api-key', opts.apiKey);
  const env = { ...process.env, BRASA_SERVE_TOKEN_DELAY_MS: String(opts.delayMs ?? 0) };
  const proc = spawn(serverBin, args, { env, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error('the server did not start: ' + out)); }, 20000);
    proc.on('exit', (code) => reject(new Error(`the server exited with ${code}: ${out}`)));
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/127\.0\.0\.1:(\d+)\//);
      if (!m) return;
      clearTimeout(timer);
      const port = Number(m[1]);
      const stop = () => new Promise((res) => {
        if (proc.exitCode !== null) { res(proc.exitCode); return; }
        const kill = setTimeout(() => proc.kill('SIGKILL'), 10000);
        proc.removeAllListeners('exit');
        proc.on('exit', (code) => { clearTimeout(kill); fs.rmSync(dir, { recursive: true, force: true }); res(code); });
        proc.kill('SIGTERM');
      });
      resolve({ url: `http://127.0.0.1:${port}`, port, proc, stop, dir });
    });
  });
}

// Polls fn until it returns a truthy value (bounded).
export async function until(fn, ms = 15000, step = 100) {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, step));
  }
}
