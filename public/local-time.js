/* global document */
// Shows each <time data-local> in the reader's own locale and time zone; the server wrote the UTC
// time into the element (and its title, which stays). Loaded with the page's CSP nonce, nothing inline.
(function () {
  var format = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
  document.querySelectorAll('time[data-local][datetime]').forEach(function (el) {
    var at = new Date(el.getAttribute('datetime'));
    if (!isNaN(at.getTime())) el.textContent = format.format(at);
  });
})();
