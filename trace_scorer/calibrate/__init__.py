"""``trace-scorer calibrate``: how far a metric's judges agree with human labels, the threshold that turns a
numeric metric into the verdict the labels give, and the cheapest judge panel that agrees as well as the best
(docs/calibrate.md)."""
