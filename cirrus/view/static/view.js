// cirrus view: a filter choice applies at once; the pages work without it too
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
    select.addEventListener("change", function () { select.form.submit(); });
  });
});
