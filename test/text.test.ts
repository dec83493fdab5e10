// The one text module (src/text.ts): NFC, the one case fold that labels and the automations'
// conditions share, lengths in code points, and file names cleaned alike wherever they come from.
import { describe, expect, it } from 'vitest';
import { evaluateCondition, type ConditionContext } from '../src/automations/conditions.js';
import { labelKey } from '../src/db/labels.js';
import { normalizeLabels } from '../src/services/labels.js';
import { cleanFilename, codePointLength, foldCase, foldText, normalizeText } from '../src/text.js';

describe('foldCase and foldText', () => {
  it('when text differs by case only, then foldCase makes it one: ß/ẞ and ss, final ς and σ, ﬁ and fi, NFD and NFC', () => {
    expect(foldCase('Straße')).toBe(foldCase('STRASSE'));
    expect(foldCase('ẞ')).toBe('ss');
    expect(foldCase('ΟΔΟΣ')).toBe(foldCase('οδοσ'));
    expect(foldCase('οδος')).toBe('οδοσ');
    expect(foldCase('ﬁm')).toBe('fim');
    expect(foldCase('Cafe\u0301')).toBe('caf\u00e9');
  });

  it('when İ is folded, then labels keep its dot (i̇, as Unicode folds it) and text conditions drop it with the accents (i)', () => {
    expect(foldCase('İ')).toBe('i\u0307');
    expect(foldCase('İ')).not.toBe(foldCase('i'));
    expect(foldText('İstanbul')).toBe('istanbul');
    expect(foldText('NÃO Ação STRASSE')).toBe(foldText('nao acao straße'));
  });

  it('when labels are kept, merged, looked up and compared by a condition, then all use the same fold', () => {
    const ws = '01900000-0000-7000-8000-000000000001';
    expect(normalizeLabels(['Straße', ' STRASSE ', 'Cafe\u0301', 'CAF\u00c9'])).toEqual(['Straße', 'Caf\u00e9']);
    expect(labelKey(ws, 'STRASSE')).toBe(labelKey(ws, ' straße'));
    const context: ConditionContext = { contact: { labels: ['Straße'], attributes: {} }, businessHours: true };
    expect(evaluateCondition({ field: 'contact.labels', operator: 'contains', value: 'STRASSE' }, context).result).toBe(true);
  });
});

describe('normalizeText and codePointLength', () => {
  it('when text is decomposed, then it is kept composed; lengths count code points, a lone surrogate as one', () => {
    expect(normalizeText('Jose\u0301')).toBe('Jos\u00e9');
    expect(codePointLength('😀'.repeat(26))).toBe(26);
    expect(codePointLength('a\ud800b')).toBe(3);
    expect(codePointLength('')).toBe(0);
  });
});

describe('cleanFilename', () => {
  it('when a name carries CR/LF, other controls, slashes and bidirectional overrides, then they go (slashes as _), in NFC, trimmed', () => {
    expect(cleanFilename('fatura\r\n.pdf')).toBe('fatura.pdf');
    expect(cleanFilename('../../etc/passwd')).toBe('.._.._etc_passwd');
    expect(cleanFilename('a\\b\u0000\u007f\u0085.txt')).toBe('a_b.txt');
    expect(cleanFilename('foto\u202egpj.exe')).toBe('fotogpj.exe');
    expect(cleanFilename('\u2066x\u2069\u200f.pdf')).toBe('x.pdf');
    expect(cleanFilename('  Relato\u0301rio.pdf ')).toBe('Relat\u00f3rio.pdf');
  });

  it('when nothing is left, then null; past 255 code points, its start is kept', () => {
    expect(cleanFilename('\r\n\u202e ')).toBeNull();
    expect(cleanFilename('😀'.repeat(300))).toBe('😀'.repeat(255));
  });
});
