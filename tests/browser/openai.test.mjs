// An off-the-shelf OpenAI client (the `openai` npm package) against brasa serve.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, inputsMissing } from './server.mjs';

test('openai client: chat and completions, streamed and not', { timeout: 60000 }, async (t) => {
  const missing = inputsMissing();
  if (missing) { t.skip(missing); return; }
  const srv = await startServer({ apiKey: 'sk-local-test' });
  try {
    const client = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'sk-local-test', maxRetries: 0 });
    const models = await client.models.list();
    const ids = models.data.map((m) => m.id);
    assert.ok(ids.includes('qwen2.Q8_0') && ids.includes('llama.Q8_0'), JSON.stringify(ids));

    const req = {
      model: 'qwen2.Q8_0',
      messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hello.' }],
      max_tokens: 12, temperature: 0, seed: 1,
    };
    const res = await client.chat.completions.create(req);
    console.log('request:', JSON.stringify(req));
    console.log('reply:', JSON.stringify(res));
    assert.equal(res.object, 'chat.completion');
    assert.equal(res.choices[0].message.role, 'assistant');
    assert.equal(typeof res.choices[0].message.content, 'string');
    assert.ok(res.usage.prompt_tokens > 0 && res.usage.completion_tokens > 0);
    assert.equal(res.usage.total_tokens, res.usage.prompt_tokens + res.usage.completion_tokens);

    const sreq = { ...req, stream: true, stream_options: { include_usage: true } };
    const stream = await client.chat.completions.create(sreq);
    let text = '', chunks = 0, finish = null, usage = null;
    for await (const chunk of stream) {
      chunks++;
      if (chunks <= 3) console.log('chunk:', JSON.stringify(chunk));
      const c = chunk.choices[0];
      if (c && c.delta && c.delta.content) text += c.delta.content;
      if (c && c.finish_reason) finish = c.finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    console.log('streamed request:', JSON.stringify(sreq));
    console.log(`streamed reply: ${chunks} chunks, text ${JSON.stringify(text)}, finish ${finish}, usage ${JSON.stringify(usage)}`);
    assert.ok(chunks >= 2);
    assert.equal(text, res.choices[0].message.content, 'same seed and greedy: same text streamed or not');
    assert.ok(finish === 'stop' || finish === 'length');
    assert.equal(usage.completion_tokens, res.usage.completion_tokens);

    const comp = await client.completions.create({ model: 'llama.Q8_0', prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
    console.log('completion reply:', JSON.stringify(comp));
    assert.equal(comp.object, 'text_completion');
    assert.equal(comp.model, 'llama.Q8_0');

    await assert.rejects(client.chat.completions.create({ ...req, model: 'gpt-nope' }), (e) => e.status === 404);
    await assert.rejects(client.chat.completions.create({ ...req, temperature: 'warm' }), (e) => e.status === 400 && /temperature/.test(e.message));
    const bad = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(bad.models.list(), (e) => e.status === 401);
  } finally {
    assert.equal(await srv.stop(), 0);
  }
});
