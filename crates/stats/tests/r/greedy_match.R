# Greedy nearest-neighbour matching without replacement, written from the
# description of MatchIt's algorithm (units sorted by distance, treated taken
# largest-first, nearest available control on each side, left wins a tie,
# 1:k in k rounds) but with real distances, so the caliper holds.
# Used as the independent reference for DistanceArithmetic::Exact.
greedy_match <- function(treat, dist, ratio = 1, caliper = NULL, order = "largest") {
  n <- length(treat)
  o <- sort.list(dist)
  pos <- integer(n); pos[o] <- seq_len(n)
  tr <- which(treat == 1)
  ord <- if (order == "largest") tr[order(dist[tr], decreasing = TRUE)] else tr[order(dist[tr])]
  cal <- if (is.null(caliper)) Inf else caliper * sd(dist)
  avail <- treat == 0
  res <- matrix(NA_integer_, length(tr), ratio)
  for (r in seq_len(ratio)) {
    for (t in ord) {
      if (!any(avail)) break
      a <- which(avail)
      l <- a[pos[a] < pos[t]]; rr <- a[pos[a] > pos[t]]
      l <- if (length(l)) l[which.max(pos[l])] else NA
      rr <- if (length(rr)) rr[which.min(pos[rr])] else NA
      gl <- if (!is.na(l)) abs(dist[t] - dist[l]) else Inf
      gr <- if (!is.na(rr)) abs(dist[t] - dist[rr]) else Inf
      if (gl > cal) { l <- NA; gl <- Inf }
      if (gr > cal) { rr <- NA; gr <- Inf }
      k <- if (is.na(l) && is.na(rr)) NA else if (gl <= gr) l else rr
      if (is.na(k)) next
      res[match(t, tr), r] <- k
      avail[k] <- FALSE
    }
  }
  res
}
