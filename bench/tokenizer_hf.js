// tokenizer_hf.js - Hugging Face tokenizers' Rust core (npm `tokenizers`)
// throughput on one file with one tokenizer.json, one thread
// (RAYON_NUM_THREADS=1; one sequence is encoded on one thread anyway), for
// comparison with `grit-tok-check bench hf ...` (see tokenizer_hf.sh).
//
//   node tokenizer_hf.js TOKENIZER_JSON FILE [REPEAT]
//
// FILE is cut into documents of at least 4096 bytes at line ends (as
// `grit-tok-check bench` does with TOK_BENCH_DOC=4096), all encoded with
// encodeBatch under TOKENIZERS_PARALLELISM=false: one thread. (One 10 MB
// string is pathologically slow in the Rust core, which is not its real use.)
'use strict';
const path = require('path');
const fs = require('fs');
const { Tokenizer } = require(path.join(__dirname, '..', 'tests', 'data', 'node_modules', 'tokenizers'));

async function main() {
  const [tj, file, rep = '3'] = process.argv.slice(2);
  const text = fs.readFileSync(file, 'utf8');
  const tok = Tokenizer.fromFile(tj);
  const docs = [];
  let cur = '', size = 0;
  for (const line of text.split(/(?<=\n)/)) {
    cur += line;
    size += Buffer.byteLength(line);
    if (size >= 4096) {
      docs.push(cur);
      cur = '';
      size = 0;
    }
  }
  if (cur) docs.push(cur);
  let best = Infinity, first = 0, n = 0;
  for (let r = 0; r < Number(rep); r++) {
    const a = process.hrtime.bigint();
    n = 0;
    for (const e of await tok.encodeBatch(docs, { addSpecialTokens: false })) n += e.getIds().length;
    const s = Number(process.hrtime.bigint() - a) / 1e9;
    if (r === 0) first = s;
    if (s < best) best = s;
  }
  const mb = Buffer.byteLength(text) / 1e6;
  console.log(`hf-rust 1 thread: ${docs.length} documents, ${n} tokens; cold cache: ${first.toFixed(3)} s, ${(mb / first).toFixed(1)} MB/s; ` +
              `warm, best of ${rep}: ${best.toFixed(3)} s, ${(n / best / 1e6).toFixed(2)} M tokens/s, ${(mb / best).toFixed(1)} MB/s`);
}
main().catch((e) => { console.error(e); process.exit(1); });
