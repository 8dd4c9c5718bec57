// The "try it" form: fields generated from a tool's input schema for the
// simple types, a JSON textarea for anything else, and a raw JSON mode for
// the whole arguments object.

import { el } from './dom.js';

let formSeq = 0;

function fieldFor(name, prop, required, idp) {
  const id = `${idp}-${name}`;
  const type = Array.isArray(prop.type) ? prop.type.find((t) => t !== 'null') : prop.type;
  const hintId = prop.description ? id + '-hint' : null;
  const label = el('label', { for: id }, name + (required ? ' *' : ''));
  const common = { id, name, 'aria-describedby': hintId, 'aria-required': required ? 'true' : null };
  let input, kind;
  if (Array.isArray(prop.enum)) {
    kind = 'enum';
    input = el('select', common,
      required ? null : el('option', { value: '' }, '(not set)'),
      ...prop.enum.map((v, i) => el('option', { value: String(i) }, JSON.stringify(v))));
    if (prop.default !== undefined) {
      const i = prop.enum.findIndex((v) => JSON.stringify(v) === JSON.stringify(prop.default));
      if (i >= 0) input.value = String(i);
    }
  } else if (type === 'boolean') {
    kind = 'boolean';
    input = el('input', { ...common, type: 'checkbox' });
    input.checked = prop.default === true;
    const wrap = el('div', { class: 'field inline' }, input, el('label', { for: id }, name),
      hintId ? el('p', { class: 'hint', id: hintId }, prop.description) : null);
    return { name, kind, input, prop, required, node: wrap };
  } else if (type === 'integer' || type === 'number') {
    kind = type;
    input = el('input', { ...common, type: 'number', step: type === 'integer' ? '1' : 'any', min: prop.minimum, max: prop.maximum });
    if (prop.default !== undefined) input.value = String(prop.default);
  } else if (type === 'string') {
    kind = 'string';
    input = el('input', { ...common, type: 'text', autocomplete: 'off' });
    if (prop.default !== undefined) input.value = String(prop.default);
  } else {
    kind = 'json';
    input = el('textarea', { ...common, rows: 3, placeholder: 'JSON value' });
    if (prop.default !== undefined) input.value = JSON.stringify(prop.default, null, 2);
  }
  const node = el('div', { class: 'field' }, label, input,
    hintId ? el('p', { class: 'hint', id: hintId }, prop.description) : null);
  return { name, kind, input, prop, required, node };
}

function readField(f) {
  const v = f.input.value;
  switch (f.kind) {
    case 'boolean':
      return { set: true, value: f.input.checked };
    case 'enum':
      if (v === '') return { set: false };
      return { set: true, value: f.prop.enum[Number(v)] };
    case 'integer':
    case 'number': {
      if (v.trim() === '') {
        if (f.required) throw new Error(`${f.name} is required`);
        return { set: false };
      }
      const n = Number(v);
      if (!Number.isFinite(n) || (f.kind === 'integer' && !Number.isInteger(n))) throw new Error(`${f.name} must be ${f.kind === 'integer' ? 'an integer' : 'a number'}`);
      return { set: true, value: n };
    }
    case 'string':
      if (v === '' && !f.required) return { set: false };
      return { set: true, value: v };
    default:
      if (v.trim() === '') {
        if (f.required) throw new Error(`${f.name} is required`);
        return { set: false };
      }
      try { return { set: true, value: JSON.parse(v) }; } catch (e) { throw new Error(`${f.name} is not valid JSON: ${e.message}`); }
  }
}

/**
 * schemaForm builds the argument inputs of a tool. read() returns the
 * arguments object or throws an Error saying which field is wrong.
 */
export function schemaForm(schema) {
  const idp = 'arg' + ++formSeq;
  const props = schema && typeof schema === 'object' && schema.properties && typeof schema.properties === 'object' ? schema.properties : null;
  const required = new Set((schema && schema.required) || []);
  const fields = props ? Object.entries(props).map(([name, prop]) => fieldFor(name, prop || {}, required.has(name), idp)) : [];
  const fieldBox = el('div', {}, ...fields.map((f) => f.node));
  if (fields.length === 0) fieldBox.append(el('p', { class: 'muted' }, props ? 'This tool takes no arguments.' : 'No field form for this schema: use raw JSON.'));

  const rawId = idp + '-raw';
  const raw = el('textarea', { id: rawId, rows: 6, spellcheck: 'false' });
  raw.value = '{}';
  const rawBox = el('div', { class: 'field' }, el('label', { for: rawId }, 'Arguments (JSON object)'), raw);
  const toggleId = idp + '-rawmode';
  const toggle = el('input', { type: 'checkbox', id: toggleId });
  const useRaw = fields.length === 0 && !props;
  toggle.checked = useRaw;
  const readFields = () => {
    const out = {};
    for (const f of fields) {
      const r = readField(f);
      if (r.set) out[f.name] = r.value;
    }
    return out;
  };
  const read = () => {
    if (!toggle.checked) return readFields();
    let v;
    try { v = JSON.parse(raw.value || '{}'); } catch (e) { throw new Error('arguments are not valid JSON: ' + e.message); }
    if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error('arguments must be a JSON object');
    return v;
  };
  const sync = () => {
    if (toggle.checked) {
      // Carry what was typed into the fields over to the raw editor.
      try { raw.value = JSON.stringify(readFields(), null, 2); } catch { /* keep the raw text */ }
    }
    fieldBox.hidden = toggle.checked;
    rawBox.hidden = !toggle.checked;
  };
  toggle.addEventListener('change', sync);
  fieldBox.hidden = useRaw;
  rawBox.hidden = !useRaw;
  const node = el('div', {},
    fieldBox, rawBox,
    el('div', { class: 'field inline' }, toggle, el('label', { for: toggleId }, 'Edit arguments as raw JSON')));
  return { node, read };
}
