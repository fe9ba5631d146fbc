// The hooks the pages leave on window for the browser tests and the
// benchmark (bench/web); the pages themselves only write them.
interface Window {
  /** ms since the navigation when the trace page was first drawn */
  __tbTraceReady?: number;
  /** ms the trace page's first view took to fetch */
  __tbTraceFetchMs?: number;
  __tbTimeline?: import('../static/js/timeline.js').Timeline;
  __tbFlame?: import('../static/js/flame.js').Flame;
}
