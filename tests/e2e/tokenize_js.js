// tokenize_js.js: reference ids from gpt-3-encoder's own JavaScript (Encoder.js, the npm package
// .ci/setup keeps in the cache folder), for tests/e2e/tokenize_compare.py.
//
//   node tokenize_js.js ENCODER_DIR ROWS_FILE
//
// ROWS_FILE holds rows of text, each ended by a NUL byte. Prints {"rows": [ids or null, ...],
// "excluded": [{"row": i, "why": "..."}]} on stdout.
//
// Where gpt-3-encoder is not what transformers' GPT2TokenizerFast does, and what is done here:
// - It has no special tokens: "<|endoftext|>" is text to it. The tokenizers crate splits the text
//   at added tokens first and pre-tokenizes each part alone, so that is done here: the row is
//   split at "<|endoftext|>", each part encoded, and the parts joined by 50256.
// - Its regex uses JavaScript's \s, which holds U+FEFF and lacks U+0085 (NEL); the tokenizers
//   crate's \s is Unicode White_Space, the other way round. Rows with either character get null
//   and an entry in "excluded" (the caller counts them; stages/tokenize/pl_bpe.h has the rule,
//   tests/unit/test_bpe.c checks how such rows split).
// - Bytes that are not UTF-8 are decoded as TextDecoder does (U+FFFD per maximal subpart, the
//   same as Python's errors='replace'), which is what pipectl and a Python caller of
//   transformers see.
'use strict';
const fs = require('fs');
const path = require('path');

const [dir, rowsFile] = process.argv.slice(2);
if (!dir || !rowsFile) {
  console.error('usage: node tokenize_js.js ENCODER_DIR ROWS_FILE');
  process.exit(2);
}
const enc = require(path.resolve(dir, 'Encoder.js'));
const data = fs.readFileSync(rowsFile);
const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
const out = { rows: [], excluded: [] };
let start = 0;
for (let i = 0; i < data.length; i++) {
  if (data[i] !== 0) continue;
  const text = decoder.decode(data.subarray(start, i));
  start = i + 1;
  const row = out.rows.length;
  if (/[\u0085\ufeff]/.test(text)) {
    out.rows.push(null);
    out.excluded.push({ row, why: 'U+0085 or U+FEFF: JavaScript\'s \\s is not Unicode White_Space' });
    continue;
  }
  const ids = [];
  text.split('<|endoftext|>').forEach((part, k) => {
    if (k > 0) ids.push(50256);
    if (part.length) for (const id of enc.encode(part)) ids.push(id);
  });
  out.rows.push(ids);
}
process.stdout.write(JSON.stringify(out));
