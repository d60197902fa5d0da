// The official `openai` npm client against a running `kvserve serve`: chat and completions,
// streaming and not, and errors surfacing as the client's own error classes. A real client that
// nobody here wrote. Needs KVSERVE_URL (like http://127.0.0.1:8080/v1) and KVSERVE_API_KEY.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';

const baseURL = process.env.KVSERVE_URL;
const apiKey = process.env.KVSERVE_API_KEY;
assert.ok(baseURL, 'set KVSERVE_URL');
assert.ok(apiKey, 'set KVSERVE_API_KEY');
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const model = 'stories260K';
const lily = ', there was a little girl named Lily';

test('models.list names the served model', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, [model]);
});

test('completions, whole and streamed, agree', async () => {
  const params = { model, prompt: 'Once upon a time', max_tokens: 16, temperature: 0 };
  const whole = await client.completions.create(params);
  assert.equal(whole.object, 'text_completion');
  assert.equal(whole.choices.length, 1);
  assert.ok(whole.choices[0].text.startsWith(lily), whole.choices[0].text);
  assert.equal(whole.choices[0].finish_reason, 'length');
  assert.equal(whole.usage.completion_tokens, 16);

  const stream = await client.completions.create({ ...params, stream: true });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      text += choice.text;
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  assert.equal(text, whole.choices[0].text);
  assert.equal(finish, 'length');
});

test('chat completions, whole and streamed with usage, agree', async () => {
  const params = {
    model,
    messages: [
      { role: 'system', content: 'You tell stories.' },
      { role: 'user', content: 'Once upon a time' },
    ],
    max_completion_tokens: 12,
    temperature: 0,
    seed: 7,
  };
  const whole = await client.chat.completions.create(params);
  assert.equal(whole.object, 'chat.completion');
  const message = whole.choices[0].message;
  assert.equal(message.role, 'assistant');
  assert.ok(message.content.length > 0);
  assert.equal(whole.usage.completion_tokens, 12);
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + 12);

  const stream = await client.chat.completions.create({
    ...params,
    stream: true,
    stream_options: { include_usage: true },
  });
  let content = '';
  let role = null;
  let usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    for (const choice of chunk.choices) {
      if (choice.delta.role) role = choice.delta.role;
      if (choice.delta.content) content += choice.delta.content;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(role, 'assistant');
  assert.equal(content, message.content);
  assert.ok(usage, 'the last chunk carries usage');
  assert.equal(usage.completion_tokens, 12);
});

test('the helper stream API collects the final message', async () => {
  const runner = client.chat.completions.stream({
    model,
    messages: [{ role: 'user', content: 'Tell me a story' }],
    max_tokens: 8,
    temperature: 0,
  });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.role, 'assistant');
  assert.equal(final.choices[0].finish_reason, 'length');
});

test('bad parameters are a BadRequestError naming the parameter', async () => {
  await assert.rejects(
    client.completions.create({ model, prompt: 'x', temperature: 7 }),
    (error) => {
      assert.ok(error instanceof OpenAI.BadRequestError, String(error));
      assert.equal(error.status, 400);
      assert.equal(error.param, 'temperature');
      return true;
    },
  );
});

test('an unknown model is a NotFoundError', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] }),
    (error) => error instanceof OpenAI.NotFoundError && error.status === 404,
  );
});

test('a wrong key is an AuthenticationError', async () => {
  const stranger = new OpenAI({ baseURL, apiKey: 'not-the-key', maxRetries: 0 });
  await assert.rejects(
    stranger.completions.create({ model, prompt: 'x', max_tokens: 1 }),
    (error) => error instanceof OpenAI.AuthenticationError && error.status === 401,
  );
});
