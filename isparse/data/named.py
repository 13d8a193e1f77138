"""The named LIBSVM data sets of the shared data directory: their file names and published dimensions.

A leaf module: the data sources (``isparse.data.sources``) and the pipeline's path defaults both read it.
The files and their provenance are listed in ``../shared/datasets/SOURCES.md``.
"""

#: Named LIBSVM sets and their file names in the data directory (see ../shared/datasets/SOURCES.md).
NAMED_FILES = {
    "a1a": "a1a",
    "a9a": "a9a",
    "w1a": "w1a",
    "w8a": "w8a",
    "mushrooms": "mushrooms",
    "phishing": "phishing",
    "german": "german.numer_scale",
}
#: The number of features each named set is published with (a1a uses indices up to 119 of 123).
NAMED_FEATURES = {"a1a": 123, "a9a": 123, "w1a": 300, "w8a": 300, "mushrooms": 112,
                  "phishing": 68, "german": 24}
DATA_DIR_ENV = "ISPARSE_DATA_DIR"
