"""Empirical privacy checks of the exported mechanisms.

`seed_chain` replays how TFLite's unseeded random ops make their numbers and
`seed_recovery` uses it to recover the internal noise seed from one release;
the epsilon audit (another module here) estimates the privacy loss from
samples. `word_generators` fills random words as apps fill them and runs
them against a phone model (which fail closed), and `java_random` finds a
java.util.Random seed from one release. Nothing heavy is imported at
package import.
"""
