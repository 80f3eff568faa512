// What the account dialog's admin lists share (saved replies, engagement rules): a request that
// says how it went in the section's note and redraws the list, and a small button named after the
// item it acts on.
export class AdminList {
  constructor({ section, api, note }) {
    Object.assign(this, { section, api });
    this.note = section.querySelector(note);
  }

  async request(operation, done) {
    this.failed = false;
    try {
      await operation();
      this.note.textContent = done;
    } catch (error) {
      this.failed = true;
      this.note.textContent = error.message;
    }
    await this.render();
    this.onChange?.();
  }

  static button(label, itemName, handler) {
    const element = Object.assign(document.createElement("button"), { type: "button", className: "button small", textContent: label });
    element.setAttribute("aria-label", `${label} ${itemName}`);
    element.addEventListener("click", handler);
    return element;
  }
}
