// tokenize_hf.js: reference ids from the Hugging Face tokenizers crate itself (the Rust code under
// transformers' GPT2TokenizerFast), through its Node binding (npm package tokenizers 0.23.2, which
// .ci/setup installs into the cache folder), for tests/e2e/tokenize_compare.py.
//
//   node tokenize_hf.js TOKENIZERS_DIR VOCAB_DIR ROWS_FILE
//
// The tokenizer is the one GPT2TokenizerFast makes of vocab.json and merges.txt (the tokenizer.json
// of Hugging Face's gpt2 snapshot): the BPE model of the two files, the ByteLevel pre-tokenizer
// (no prefix space, GPT-2's regex), the ByteLevel decoder and <|endoftext|> as a special added
// token. ROWS_FILE holds rows of text, each
// ended by a NUL byte, decoded as TextDecoder does (U+FFFD per maximal subpart, as Python's
// errors='replace'). Prints {"rows": [ids, ...], "excluded": []} on stdout: nothing is excluded,
// this is the reference.
'use strict';
const fs = require('fs');
const path = require('path');

async function main() {
  const [modDir, vocab, rowsFile] = process.argv.slice(2);
  const tk = require(path.resolve(modDir, 'node_modules', 'tokenizers'));
  // the tokenizer.json Hugging Face's gpt2 snapshot has, with these two files' vocabulary
  const vocabJson = JSON.parse(fs.readFileSync(path.join(vocab, 'vocab.json'), 'utf-8'));
  const merges = fs.readFileSync(path.join(vocab, 'merges.txt'), 'utf-8').split('\n')
    .filter((l) => l.length && !l.startsWith('#version'));
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
  const tok = tk.Tokenizer.fromString(JSON.stringify({
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [{ id: vocabJson['<|endoftext|>'], content: '<|endoftext|>', single_word: false,
      lstrip: false, rstrip: false, normalized: true, special: true }],
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: byteLevel,
    decoder: byteLevel,
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '',
      end_of_word_suffix: '', fuse_unk: false, byte_fallback: false, vocab: vocabJson, merges },
  }));
  const data = fs.readFileSync(rowsFile);
  const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  const rows = [];
  let start = 0;
  for (let i = 0; i < data.length; i++) {
    if (data[i] !== 0) continue;
    rows.push(decoder.decode(data.subarray(start, i)));
    start = i + 1;
  }
  const out = { rows: [], excluded: [] };
  for (let i = 0; i < rows.length; i += 4096) {
    const encs = await tok.encodeBatch(rows.slice(i, i + 4096), { addSpecialTokens: false });
    for (const e of encs) out.rows.push(e.getIds());
  }
  process.stdout.write(JSON.stringify(out));
}
main().catch((e) => { console.error(e); process.exit(1); });
