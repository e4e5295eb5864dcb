"""Input: text files and TFRecords read and written, [CLS] A [SEP] B [SEP]
packing, and the tf.data pipeline that feeds a model."""
