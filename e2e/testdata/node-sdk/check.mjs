// check.mjs: the official Node OpenAI SDK (npm package openai) against the
// agentmesh HTTP gateway, used the ordinary way. TestNodeSDK (e2e/node_test.go)
// runs it; by hand, with the openai package installed beside this file:
//
//	AGENTMESH_GATEWAY_URL=http://127.0.0.1:8080 OPENAI_API_KEY=amk_... node check.mjs
//
// where the key is one `agentmesh keys create` printed. Every check uses
// model "fixture", whose adapter answers "echo: <prompt>". It prints one
// JSON line of results and exits 0, or names the failed check on stderr
// and exits 1.
import OpenAI from "openai";
import { VERSION } from "openai/version";

const gateway = process.env.AGENTMESH_GATEWAY_URL;
if (!gateway || !process.env.OPENAI_API_KEY) {
	console.error("check.mjs: set AGENTMESH_GATEWAY_URL and OPENAI_API_KEY");
	process.exit(2);
}
const model = "fixture";
const prompt = "hi";
const want = `echo: ${prompt}`;

// The key comes from OPENAI_API_KEY, as the SDK reads it by default. No
// retries, so that a failure is the gateway's first answer.
const client = new OpenAI({ baseURL: `${gateway}/v1`, maxRetries: 0, timeout: 60_000 });

const results = {};
let current = "";

function fail(message) {
	throw new Error(`${current}: ${message}`);
}

function expectEqual(what, got, wanted) {
	if (got !== wanted) {
		fail(`${what} is ${JSON.stringify(got)}, want ${JSON.stringify(wanted)}`);
	}
}

async function check(name, f) {
	current = name;
	results[name] = await f();
}

async function main() {
	await check("chat", async () => {
		const c = await client.chat.completions.create({
			model,
			messages: [{ role: "user", content: prompt }],
		});
		expectEqual("choices[0].message.content", c.choices[0]?.message?.content, want);
		expectEqual("choices[0].finish_reason", c.choices[0]?.finish_reason, "stop");
		if (!c.usage || typeof c.usage.total_tokens !== "number") {
			fail(`no usage: ${JSON.stringify(c.usage)}`);
		}
		return { id: c.id, text: c.choices[0].message.content, usage: c.usage };
	});

	await check("chat_stream", async () => {
		const stream = await client.chat.completions.create({
			model,
			messages: [{ role: "user", content: prompt }],
			stream: true,
			stream_options: { include_usage: true },
		});
		let text = "";
		let last;
		let chunks = 0;
		for await (const chunk of stream) {
			chunks++;
			text += chunk.choices[0]?.delta?.content ?? "";
			last = chunk;
		}
		expectEqual("the streamed text", text, want);
		if (!last?.usage || typeof last.usage.total_tokens !== "number") {
			fail(`the last chunk has no usage: ${JSON.stringify(last)}`);
		}
		return { chunks, text, usage: last.usage };
	});

	await check("responses", async () => {
		const r = await client.responses.create({ model, input: prompt });
		expectEqual("output_text", r.output_text, want);
		expectEqual("status", r.status, "completed");
		return { id: r.id, text: r.output_text, usage: r.usage };
	});

	await check("responses_stream", async () => {
		const stream = await client.responses.create({ model, input: prompt, stream: true });
		let text = "";
		let deltas = 0;
		const types = [];
		let last;
		for await (const event of stream) {
			types.push(event.type);
			if (event.type === "response.output_text.delta") {
				deltas++;
				text += event.delta;
			}
			last = event;
		}
		if (deltas === 0) {
			fail(`no response.output_text.delta event among ${types.join(" ")}`);
		}
		expectEqual("the deltas' text", text, want);
		expectEqual("the last event's type", last?.type, "response.completed");
		const usage = last.response?.usage;
		if (!usage || typeof usage.total_tokens !== "number") {
			fail(`response.completed carries no usage: ${JSON.stringify(last.response)}`);
		}
		const final = (last.response.output ?? [])
			.filter((item) => item.type === "message")
			.flatMap((item) => item.content)
			.filter((part) => part.type === "output_text")
			.map((part) => part.text)
			.join("");
		expectEqual("response.completed's output text", final, want);
		return { events: types.length, deltas, text, usage };
	});

	await check("models", async () => {
		const ids = [];
		for await (const m of client.models.list()) {
			ids.push(m.id);
		}
		if (!ids.includes(model)) {
			fail(`${JSON.stringify(ids)} does not list ${model}`);
		}
		return { ids };
	});

	await check("wrong_key", async () => {
		const wrong = new OpenAI({ baseURL: `${gateway}/v1`, apiKey: "amk_not-a-key", maxRetries: 0, timeout: 60_000 });
		try {
			await wrong.chat.completions.create({ model, messages: [{ role: "user", content: prompt }] });
		} catch (err) {
			if (!(err instanceof OpenAI.AuthenticationError)) {
				fail(`the error is not an OpenAI.AuthenticationError: ${err?.constructor?.name}: ${err}`);
			}
			expectEqual("status", err.status, 401);
			return { status: err.status, code: err.code, type: err.type };
		}
		fail("a wrong key was accepted");
	});
}

try {
	await main();
} catch (err) {
	const detail = err instanceof OpenAI.APIError ? ` (HTTP ${err.status}: ${JSON.stringify(err.error)})` : "";
	console.error(`check.mjs: FAIL ${err.message.startsWith(current) ? "" : current + ": "}${err.message}${detail}`);
	process.exit(1);
}
console.log(JSON.stringify({ ok: true, sdk: VERSION, node: process.version, checks: results }));
