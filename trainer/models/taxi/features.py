"""The taxi model's features: the raw trip fields a request (or a record) carries, and the
one preprocessing function that turns them into the model's inputs, run in tf.data at
training and evaluation and inside the SavedModel at serving.

Raw fields (a missing value gets its default, as the TFX taxi sample's `_fill_in_missing`
does: 0 for numbers, "" for strings); REQUIRED ones must be in every request:

    trip_miles, trip_seconds, fare            float   (required)
    payment_type                              string  (required)
    company                                   string
    pickup_/dropoff_latitude, _longitude      float
    trip_start_hour, _day, _month             int
    pickup_/dropoff_community_area            int

Model inputs (all [B]): `numeric` float [B, 7], the z-scored numbers (mean and standard
deviation of the training split, clipped to +-CLIP); integer ids: `payment_type` (the
training split's vocabulary, then one out-of-vocabulary id), `company` (hashed),
`miles_bucket` and `seconds_bucket` (bucketised by MILES_BOUNDARIES / SECONDS_BOUNDARIES),
`miles_x_seconds` (their HashedCrossing), `hour`, `day`, `month`, `pickup_area`,
`dropoff_area`.
"""
from __future__ import annotations

import keras
import tensorflow as tf

FLOATS = ("trip_miles", "trip_seconds", "fare", "pickup_latitude", "pickup_longitude",
          "dropoff_latitude", "dropoff_longitude")
INTS = ("trip_start_hour", "trip_start_day", "trip_start_month", "pickup_community_area",
        "dropoff_community_area")
STRINGS = ("payment_type", "company")
RAW = {**{name: tf.float32 for name in FLOATS}, **{name: tf.int64 for name in INTS},
       **{name: tf.string for name in STRINGS}}
DEFAULTS = {**{name: 0.0 for name in FLOATS}, **{name: 0 for name in INTS}, **{name: "" for name in STRINGS}}
REQUIRED = ("trip_miles", "trip_seconds", "fare", "payment_type")
LABEL = "big_tipper"  # prepare.label: tips > 20% of the fare, as the TFX taxi pipeline

# Bucket boundaries of the wide part: the AI Platform structured (Chicago taxi) sample's
# (GoogleCloudPlatform/ai-platform-samples, training/tensorflow/structured/base/trainer/featurizer.py).
MILES_BOUNDARIES = (5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0, 45.0, 50.0)
SECONDS_BOUNDARIES = (900.0, 1800.0, 2700.0, 3600.0)
PAYMENT_VOCABULARY = 15  # at most this many payment types get their own id (then 1 OOV id)
SIZES = {  # model input -> number of ids
    "payment_type": PAYMENT_VOCABULARY + 1,
    "company": 100,
    "miles_bucket": len(MILES_BOUNDARIES) + 1,
    "seconds_bucket": len(SECONDS_BOUNDARIES) + 1,
    "miles_x_seconds": 64,
    "hour": 24,
    "day": 8,  # 1..7 (Sunday 1)
    "month": 13,  # 1..12
    "pickup_area": 78,  # community areas 1..77, 0 unknown
    "dropoff_area": 78,
}
WIDE = ("payment_type", "company", "miles_bucket", "seconds_bucket", "miles_x_seconds")
DEEP = ("payment_type", "company", "hour", "day", "month", "pickup_area", "dropoff_area")
CLIP = 5.0


def record_spec() -> dict:
    """tf.io.parse_example features of a trip record (written by prepare.py)."""
    spec = {name: tf.io.FixedLenFeature([], dtype, default_value=DEFAULTS[name]) for name, dtype in RAW.items()}
    spec[LABEL] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def input_spec() -> dict:
    spec = {name: tf.TensorSpec([None], tf.int64, name=name) for name in SIZES}
    spec["numeric"] = tf.TensorSpec([None, len(FLOATS)], tf.float32, name="numeric")
    return spec


class Preprocess(tf.Module):
    """raw {field: [B] tensor} -> model inputs, with the vocabulary and statistics of
    `metadata` (prepare.py's metadata.json) as constants. A tf.Module so that the
    SavedModel tracks its lookup table."""

    def __init__(self, metadata: dict):
        super().__init__(name="preprocess")
        vocabulary = list(metadata["vocabulary"]["payment_type"])[:PAYMENT_VOCABULARY]
        self.payment = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(vocabulary, tf.string),
                                                tf.range(len(vocabulary), dtype=tf.int64)),
            default_value=PAYMENT_VOCABULARY)
        stats = metadata["statistics"]
        self.mean = tf.constant([stats[name]["mean"] for name in FLOATS], tf.float32)
        self.std = tf.constant([max(stats[name]["std"], 1e-6) for name in FLOATS], tf.float32)
        self.cross = keras.layers.HashedCrossing(SIZES["miles_x_seconds"], name="miles_x_seconds")

    def __call__(self, raw: dict) -> dict:
        miles, seconds = tf.cast(raw["trip_miles"], tf.float32), tf.cast(raw["trip_seconds"], tf.float32)
        numeric = tf.stack([tf.cast(raw[name], tf.float32) for name in FLOATS], axis=1)
        miles_bucket = tf.cast(tf.raw_ops.Bucketize(input=miles, boundaries=list(MILES_BOUNDARIES)), tf.int64)
        seconds_bucket = tf.cast(tf.raw_ops.Bucketize(input=seconds, boundaries=list(SECONDS_BOUNDARIES)),
                                 tf.int64)

        def ids(name: str, value: tf.Tensor) -> tf.Tensor:
            return tf.clip_by_value(tf.cast(value, tf.int64), 0, SIZES[name] - 1)

        return {
            "numeric": tf.clip_by_value((numeric - self.mean) / self.std, -CLIP, CLIP),
            "payment_type": self.payment.lookup(raw["payment_type"]),
            "company": tf.strings.to_hash_bucket_fast(raw["company"], SIZES["company"]),
            "miles_bucket": miles_bucket,
            "seconds_bucket": seconds_bucket,
            "miles_x_seconds": tf.reshape(tf.cast(self.cross((miles_bucket[:, None], seconds_bucket[:, None])),
                                                  tf.int64), [-1]),
            "hour": ids("hour", raw["trip_start_hour"]),
            "day": ids("day", raw["trip_start_day"]),
            "month": ids("month", raw["trip_start_month"]),
            "pickup_area": ids("pickup_area", raw["pickup_community_area"]),
            "dropoff_area": ids("dropoff_area", raw["dropoff_community_area"]),
        }
