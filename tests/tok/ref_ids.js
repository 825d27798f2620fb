// ref_ids.js - reference token ids from the npm tokenizers, for grit's parity test.
//
//   node ref_ids.js gpt2|neox NEOX_TOKENIZER_JSON OUTDIR FILE...
//   node ref_ids.js hf:TAG TOKENIZER_JSON OUTDIR FILE...
//
// For each FILE writes OUTDIR/<base>.txt (the file decoded as UTF-8 the WHATWG
// way, invalid sequences -> U+FFFD, re-encoded: exactly the string the
// reference saw) and OUTDIR/<base>.<mode>.ids (little-endian u32 ids).
// gpt2: npm tiktoken (WASM build of OpenAI's tokenizer), encoding "gpt2",
//       special tokens treated as ordinary text.
// neox: npm tokenizers (Hugging Face), Tokenizer.fromFile(tokenizer.json);
//       added tokens (special ones too) are recognised, as HF always does.
// hf:TAG: any tokenizer.json through npm tokenizers, with the post-processor's
//       special tokens added (BOS for Llama 2); ids go to <base>.TAG.ids.
'use strict';
const fs = require('fs');
const path = require('path');
const nm = path.join(__dirname, '..', 'data', 'node_modules');

async function main() {
  const [mode, neoxJson, outdir, ...files] = process.argv.slice(2);
  let encode;
  if (mode === 'gpt2') {
    const { get_encoding } = require(path.join(nm, 'tiktoken'));
    const enc = get_encoding('gpt2');
    encode = async (s) => Uint32Array.from(enc.encode(s, [], []));
  } else if (mode === 'neox') {
    const { Tokenizer } = require(path.join(nm, 'tokenizers'));
    const tok = Tokenizer.fromFile(neoxJson);
    encode = async (s) => Uint32Array.from((await tok.encode(s, null, { addSpecialTokens: false })).getIds());
  } else if (mode.startsWith('hf:')) {
    const { Tokenizer } = require(path.join(nm, 'tokenizers'));
    const tok = Tokenizer.fromFile(neoxJson);
    encode = async (s) => Uint32Array.from((await tok.encode(s, null, { addSpecialTokens: true })).getIds());
  } else {
    throw new Error(`mode: expected gpt2 or neox, got ${mode}`);
  }
  const dec = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
  for (const f of files) {
    const base = path.join(outdir, path.basename(f));
    const text = dec.decode(fs.readFileSync(f));
    fs.writeFileSync(base + '.txt', Buffer.from(text, 'utf8'));
    const ids = await encode(text);
    fs.writeFileSync(`${base}.${mode.replace(/^hf:/, '')}.ids`, Buffer.from(ids.buffer, ids.byteOffset, ids.byteLength));
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
