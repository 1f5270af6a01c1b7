// Live refresh without full reloads: every element with data-refresh="URL" is replaced by
// the HTML fragment at URL every data-interval ms while the page is visible and "live" is on.
// A form the user is typing in is never replaced. No framework, no build step.
(function () {
  "use strict";
  const toggle = document.getElementById("live-toggle");
  const live = () => !toggle || toggle.checked;
  if (toggle) {
    toggle.checked = localStorage.getItem("strom-live") !== "off";
    toggle.addEventListener("change", () => localStorage.setItem("strom-live", toggle.checked ? "on" : "off"));
  }
  function busy(el) {
    const focused = document.activeElement;
    return focused && el.contains(focused) && /INPUT|TEXTAREA|SELECT/.test(focused.tagName);
  }
  function finished(el) {
    const state = el.querySelector("[data-state]");
    return el.dataset.untilDone && state && state.dataset.state !== "running";
  }
  document.querySelectorAll("[data-refresh]").forEach((el) => {
    const interval = parseInt(el.dataset.interval || "5000", 10);
    let inFlight = false;
    const timer = setInterval(async () => {
      if (finished(el)) { clearInterval(timer); return; }
      if (inFlight || document.hidden || !live() || busy(el)) return;
      inFlight = true;
      try {
        const response = await fetch(el.dataset.refresh, { credentials: "same-origin" });
        if (response.ok) {
          el.innerHTML = await response.text();
          el.dispatchEvent(new CustomEvent("refreshed"));
        }
      } catch (e) {
        // The console or the network is away: the next tick tries again.
      } finally {
        inFlight = false;
      }
    }, interval);
  });
})();
