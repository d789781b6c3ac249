// The cookie-keeping HTTP browser lives with the development tools (npm run demo uses it too).
export { Browser, formSubmission, parseForms, textOf, type FormChoice, type FormSpec, type Page } from '../../src/dev/http-browser.js';
