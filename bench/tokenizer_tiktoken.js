// tokenizer_tiktoken.js - npm tiktoken (WASM, "gpt2") throughput on one file,
// for comparison with `grit-tok-check bench gpt2 ...` (see tokenizer.sh).
'use strict';
const path = require('path');
const fs = require('fs');
const { get_encoding } = require(path.join(__dirname, '..', 'tests', 'data', 'node_modules', 'tiktoken'));
const text = fs.readFileSync(process.argv[2], 'utf8');
const enc = get_encoding('gpt2');
let best = Infinity, n = 0;
for (let r = 0; r < 3; r++) {
  const a = process.hrtime.bigint();
  n = enc.encode(text, [], []).length;
  const s = Number(process.hrtime.bigint() - a) / 1e9;
  if (s < best) best = s;
}
const mb = Buffer.byteLength(text) / 1e6;
console.log(`tiktoken (npm WASM) 1 thread: ${n} tokens, best of 3: ${best.toFixed(3)} s, ` +
            `${(n / best / 1e6).toFixed(2)} M tokens/s, ${(mb / best).toFixed(1)} MB/s`);
