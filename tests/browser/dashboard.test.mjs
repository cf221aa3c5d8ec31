// The dashboard in Debian's headless chromium (driven by playwright-core, no downloaded browser):
// chat streams, the tok/s plot moves, pt/en switches and is remembered, a model switch shows
// loading -> ready in the lifecycle. Leaves tests/artifacts/dashboard*.png.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startServer, inputsMissing, until, root } from './server.mjs';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = path.join(root, 'tests', 'artifacts');

test('dashboard: chat, plots, language, model switch', { timeout: 120000 }, async (t) => {
  const missing = inputsMissing() || (fs.existsSync(CHROMIUM) ? null : `${CHROMIUM} is missing`);
  if (missing) { t.skip(missing); return; }
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const srv = await startServer({ delayMs: 25, stories: true });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'brasa-chromium-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1400, height: 1000 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const outside = [];
  try {
    const page = ctx.pages()[0] || await ctx.newPage();
    // the page may talk to this server only
    page.on('request', (r) => { if (!r.url().startsWith(srv.url) && !r.url().startsWith('data:')) outside.push(r.url()); });
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); }); // CSP violations too
    await page.goto(srv.url + '/');
    await page.click('#lang-en');
    await until(async () => (await page.getAttribute('#model-state', 'data-state')) === 'ready');
    assert.equal(await page.textContent('#send-btn'), 'Send');

    // chat: the reply grows while it streams
    await page.fill('#s-max_tokens', '80');
    await page.fill('#s-seed', '7');
    await page.fill('#s-temperature', '0.5');
    await page.fill('#prompt', 'Once upon a time, a little dragon');
    await page.click('#send-btn');
    const reply = '.msg.assistant .text';
    const first = await until(async () => {
      const s = await page.$eval(reply, (e) => e.textContent).catch(() => '');
      return s.length > 0 ? s : null;
    });
    const streaming = await page.$eval('.msg.assistant', (e) => e.classList.contains('streaming'));
    const later = await until(async () => {
      const s = await page.$eval(reply, (e) => e.textContent);
      return s.length > first.length ? s : null;
    });
    assert.ok(streaming, 'the reply was still streaming when its first text appeared');
    assert.ok(later.startsWith(first), 'text is appended as tokens arrive');
    await until(async () => (await page.getAttribute('.msg.assistant', 'data-done')) === '1', 30000);

    // the tok/s plot has drawn a non-zero point; the last-generation table is filled
    await until(async () => Number(await page.getAttribute('#plot-toks', 'data-last')) > 0 ||
      Number(await page.getAttribute('#plot-toks', 'data-points')) > 0 &&
      (await page.$eval('#l-ng', (e) => e.textContent)) !== '–');
    const pts0 = Number(await page.getAttribute('#plot-toks', 'data-points'));
    await until(async () => Number(await page.getAttribute('#plot-toks', 'data-points')) > pts0, 5000);
    assert.notEqual(await page.textContent('#l-ng'), '–');
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-en.png'), fullPage: true });

    // language: every visible string switches, and the choice survives a reload
    await page.click('#lang-pt');
    assert.equal(await page.textContent('#send-btn'), 'Enviar');
    assert.equal(await page.textContent('h2[data-i18n="chat"]'), 'Conversa');
    assert.equal(await page.textContent('h2[data-i18n="memory"]'), 'Memória');
    await page.reload();
    await until(async () => (await page.textContent('#send-btn')) === 'Enviar');
    assert.equal(await page.getAttribute('html', 'lang'), 'pt-BR');

    // switch model at run time: the lifecycle goes loading -> ready for the new model
    await until(async () => (await page.$$('#model-select option')).length >= 2);
    await page.selectOption('#model-select', 'llama.Q8_0');
    await page.click('#load-btn');
    await until(async () => {
      const s = await page.textContent('#model-state');
      return (await page.getAttribute('#model-state', 'data-state')) === 'ready' && s.includes('llama.Q8_0');
    });
    const events = await page.$$eval('#timeline li', (lis) => lis.map((li) => [
      li.querySelector('.state').dataset.state, li.querySelector('.msgtext').textContent]));
    const chron = events.reverse();
    const iLoad = chron.findIndex(([s, m]) => s === 'loading' && m.startsWith('llama.Q8_0'));
    const iReady = chron.findIndex(([s, m], i) => i > iLoad && s === 'ready' && m.startsWith('llama.Q8_0'));
    assert.ok(iLoad >= 0 && iReady > iLoad, 'timeline: ' + JSON.stringify(chron));
    assert.ok(chron.some(([s]) => s === 'unloading'), 'the old model was unloaded first');
    assert.equal(await page.textContent('#timeline li .state'), 'pronto');

    // one more reply on the new model, then the picture
    await page.fill('#prompt', 'Olá!');
    await page.click('#send-btn');
    // (the reload emptied the chat: this is its first reply)
    await until(async () => (await page.getAttribute('.msg.assistant', 'data-done')) === '1', 30000);
    assert.ok((await page.$eval('.msg.assistant .text', (e) => e.textContent)).length > 0);
    await page.waitForTimeout(1200);
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard.png'), fullPage: true });
    assert.deepEqual(errors, [], 'no script errors');
    assert.deepEqual(outside, [], 'no request left the server');
  } finally {
    await ctx.close();
    fs.rmSync(profile, { recursive: true, force: true });
    assert.equal(await srv.stop(), 0, 'the server stopped cleanly');
  }
});
