-- Data preparation needs cores, not cards. It is told CUDA_VISIBLE_DEVICES=
-- (empty) so it cannot grab a card someone else was given.
job "prep-imagenet" {
  cmd    = "python3 prep.py --shards 64 && touch /srv/ml/data/READY",
  dir    = "/srv/ml/data",
  flavor = "cpu-prep",
  priority = 5,                 -- ahead of the sweep when both wait
}
