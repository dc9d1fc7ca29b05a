/**
 * The DOM builders the widgets share: an element with its class and text, a picker.
 */

/** A new `tag` element with `className` (none when empty) and, when given, its text. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className = '',
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** A `<select>` offering each of `values` (its text is its value). */
export function picker(className: string, title: string, values: string[]): HTMLSelectElement {
  const select = h('select', className);
  select.title = title;
  for (const value of values) {
    const option = h('option', '', value);
    option.value = value;
    select.appendChild(option);
  }
  return select;
}
