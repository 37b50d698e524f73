"""Lab 01 catalogue: the mistakes students make (MUTANTS) and correct alternatives (VARIANTS).

Each entry's ``source`` is run after the reference code and redefines one graded name. A mutant must lose
points on ``question``; a variant must keep full marks on every question.
"""

from attnlab.grading.core.mutants import MOST, PART, SLIP, Entry

# ------------------------------------------------------------------------------------------------ mutants
MUTANTS = [
    # tokenize
    Entry("tokenize_split_on_spaces", "tokenize", '''
def tokenize(text):
    return text.lower().split()
''', "splits on white space only: punctuation stays glued to the words ('panic:')",
        hint="your tokens keep punctuation attached to words (\"panic:\"); every character that is neither a word "
             "character nor white space must be a token of its own", loses=MOST),
    Entry("tokenize_no_lowercase", "tokenize", '''
def tokenize(text):
    return re.findall(r"[\\w']+|[^\\w\\s]", text)
''', "forgets to lowercase", hint="lowercase the text first: 'The' and 'the' must be the same token", loses=MOST),
    Entry("tokenize_apostrophe_splits", "tokenize", '''
def tokenize(text):
    return re.findall(r"\\w+|[^\\w\\s]", text.lower())
''', "\\w+ without the apostrophe: don't -> don, ', t",
        hint="apostrophes belong to the word: \"don't\" is one token; put ' in the character class of the runs", loses=MOST),
    Entry("tokenize_drops_punctuation", "tokenize", '''
def tokenize(text):
    return re.findall(r"[\\w']+", text.lower())
''', "keeps the word runs only: punctuation and emoji disappear",
        hint="your tokens leave out punctuation; '!' and ',' are tokens too (one character each)", loses=MOST),
    Entry("tokenize_punctuation_runs", "tokenize", '''
def tokenize(text):
    return re.findall(r"[\\w']+|[^\\w\\s]+", text.lower())
''', "[^\\w\\s]+ groups runs of punctuation: '!!' is one token instead of two",
        hint="a run of punctuation such as '!!' or '...' must give one token per character: drop the + after "
             "the second alternative", loses=MOST),
    Entry("tokenize_ascii_only", "tokenize", '''
def tokenize(text):
    return re.findall(r"[a-z0-9_']+|[^a-z0-9_'\\s]", text.lower())
''', "ASCII letter classes: café -> caf, é",
        hint="letters outside a-z (é, ß, λ, 日) are word characters too: use \\w instead of [a-z0-9_]", loses=PART),
    Entry("tokenize_letters_only", "tokenize", '''
def tokenize(text):
    return re.findall(r"[a-zA-Z\\u00C0-\\uFFFF']+|[^\\w\\s]", text.lower())
''', "letters only in the runs: digits and underscores are dropped (neither alternative matches them)",
        hint="digits and the underscore are word characters: '42' and 'snake_case' are tokens", loses=MOST),
    Entry("tokenize_casefold", "tokenize", '''
def tokenize(text):
    return re.findall(r"[\\w']+|[^\\w\\s]", text.casefold())
''', "casefold() is not lower(): Straße -> strasse",
        hint="use str.lower(): casefold() also rewrites letters such as ß into ss", loses=(0.15, 0.8)),  # 20% at some seeds
    Entry("tokenize_strips_apostrophes", "tokenize", '''
def tokenize(text):
    tokens = []
    for t in re.findall(r"[\\w']+|[^\\w\\s]", text.lower()):
        core = t.strip("'")
        if core and core != t:
            tokens += ["'"] * (len(t) - len(t.lstrip("'"))) + [core] + ["'"] * (len(t) - len(t.rstrip("'")))
        else:
            tokens.append(t)
    return tokens
''', "splits leading and trailing apostrophes off ('quoted' -> ', quoted, ')",
        hint="a token is a maximal run of word characters and apostrophes: \"'quoted'\" is one token, quotes "
             "included", loses=(0.15, 0.8)),  # 20% at some seeds
    Entry("tokenize_split_nonword", "tokenize", '''
def tokenize(text):
    return [t for t in re.split(r"[^\\w']+", text.lower()) if t]
''', "re.split on non-word characters: punctuation is thrown away",
        hint="your tokens leave out punctuation; '!' and ',' are tokens too (one character each)", loses=MOST),

    # build_vocab
    Entry("vocab_most_common_ties", "build_vocab", '''
def build_vocab(token_lists, max_size=None, min_freq=1):
    if max_size is not None and max_size < 2:
        raise ValueError(f"max_size={max_size} is too small")
    counts = Counter(t for tokens in token_lists for t in tokens)
    kept = [t for t, c in counts.most_common() if c >= min_freq]
    if max_size is not None:
        kept = kept[: max_size - 2]
    return {"<pad>": 0, "<unk>": 1, **{t: i + 2 for i, t in enumerate(kept)}}
''', "Counter.most_common() orders ties by first appearance, not alphabetically",
        hint=("tokens with the same count must be in alphabetical order; Counter.most_common() keeps them in the "
              "order they first appeared: sort by count first, then break ties by the token itself"), loses=MOST),
    Entry("vocab_ties_reverse_alphabetical", "build_vocab", '''
def build_vocab(token_lists, max_size=None, min_freq=1):
    if max_size is not None and max_size < 2:
        raise ValueError(f"max_size={max_size} is too small")
    counts = Counter(t for tokens in token_lists for t in tokens)
    kept = sorted((t for t in counts if counts[t] >= min_freq), key=lambda t: (counts[t], t), reverse=True)
    if max_size is not None:
        kept = kept[: max_size - 2]
    return {"<pad>": 0, "<unk>": 1, **{t: i + 2 for i, t in enumerate(kept)}}
''', "sorted(key=(count, token), reverse=True) also reverses the alphabetical order of ties",
        hint="reverse=True also puts the ties in reverse alphabetical order; sort with the key (-count, token) "
             "and no reverse", loses=MOST),
    Entry("vocab_ascending_counts", "build_vocab", '''
def build_vocab(token_lists, max_size=None, min_freq=1):
    if max_size is not None and max_size < 2:
        raise ValueError(f"max_size={max_size} is too small")
    counts = Counter(t for tokens in token_lists for t in tokens)
    kept = sorted((t for t in counts if counts[t] >= min_freq), key=lambda t: (counts[t], t))
    if max_size is not None:
        kept = kept[: max_size - 2]
    return {"<pad>": 0, "<unk>": 1, **{t: i + 2 for i, t in enumerate(kept)}}
''', "sorts by ascending count: the rarest words get the small ids and max_size keeps them",
        hint="the most frequent token should get id 2: sort by descending count", loses=MOST),
    Entry("vocab_max_size_without_specials", "build_vocab", '''
def build_vocab(token_lists, max_size=None, min_freq=1):
    if max_size is not None and max_size < 2:
        raise ValueError(f"max_size={max_size} is too small")
    counts = Counter(t for tokens in token_lists for t in tokens)
    kept = sorted((t for t in counts if counts[t] >= min_freq), key=lambda t: (-counts[t], t))
    if max_size is not None:
        kept = kept[:max_size]
    return {"<pad>": 0, "<unk>": 1, **{t: i + 2 for i, t in enumerate(kept)}}
''', "keeps max_size tokens plus the two specials",
        hint="max_size counts <pad> and <unk>: keep at most max_size - 2 ordinary tokens", loses=PART),
    Entry("vocab_min_freq_strict", "build_vocab", '''
def build_vocab(token_lists, max_size=None, min_freq=1):
    if max_size is not None and max_size < 2:
        raise ValueError(f"max_size={max_size} is too small")
    counts = Counter(t for tokens in token_lists for t in tokens)
    kept = sorted((t for t in counts if counts[t] > min_freq), key=lambda t: (-counts[t], t))
    if max_size is not None:
        kept = kept[: max_size - 2]
    return {"<pad>": 0, "<unk>": 1, **{t: i + 2 for i, t in enumerate(kept)}}
''', "count > min_freq instead of >=",
        hint="min_freq keeps tokens that occur at least min_freq times (count >= min_freq), not more than", loses=MOST),
    Entry("vocab_specials_swapped", "build_vocab", '''
def build_vocab(token_lists, max_size=None, min_freq=1):
    if max_size is not None and max_size < 2:
        raise ValueError(f"max_size={max_size} is too small")
    counts = Counter(t for tokens in token_lists for t in tokens)
    kept = sorted((t for t in counts if counts[t] >= min_freq), key=lambda t: (-counts[t], t))
    if max_size is not None:
        kept = kept[: max_size - 2]
    return {"<unk>": 0, "<pad>": 1, **{t: i + 2 for i, t in enumerate(kept)}}
''', "<unk> = 0 and <pad> = 1", hint="in this lab <pad> is 0 and <unk> is 1", loses=MOST),
    Entry("vocab_document_frequency", "build_vocab", '''
def build_vocab(token_lists, max_size=None, min_freq=1):
    if max_size is not None and max_size < 2:
        raise ValueError(f"max_size={max_size} is too small")
    counts = Counter(t for tokens in token_lists for t in set(tokens))
    kept = sorted((t for t in counts if counts[t] >= min_freq), key=lambda t: (-counts[t], t))
    if max_size is not None:
        kept = kept[: max_size - 2]
    return {"<pad>": 0, "<unk>": 1, **{t: i + 2 for i, t in enumerate(kept)}}
''', "counts each token once per list (document frequency) instead of every occurrence",
        hint="count every occurrence of a token, not the number of lists it appears in", loses=MOST),
    Entry("vocab_ids_from_zero", "build_vocab", '''
def build_vocab(token_lists, max_size=None, min_freq=1):
    if max_size is not None and max_size < 2:
        raise ValueError(f"max_size={max_size} is too small")
    counts = Counter(t for tokens in token_lists for t in tokens)
    kept = sorted((t for t in counts if counts[t] >= min_freq), key=lambda t: (-counts[t], t))
    if max_size is not None:
        kept = kept[: max_size - 2]
    return {"<pad>": 0, "<unk>": 1, **{t: i for i, t in enumerate(kept)}}
''', "numbers the tokens from 0, colliding with the specials",
        hint="ids 0 and 1 belong to <pad> and <unk>: the first ordinary token gets id 2", loses=MOST),
    Entry("vocab_no_error_for_tiny_max_size", "build_vocab", '''
def build_vocab(token_lists, max_size=None, min_freq=1):
    counts = Counter(t for tokens in token_lists for t in tokens)
    kept = sorted((t for t in counts if counts[t] >= min_freq), key=lambda t: (-counts[t], t))
    if max_size is not None:
        kept = kept[: max(max_size - 2, 0)]
    return {"<pad>": 0, "<unk>": 1, **{t: i + 2 for i, t in enumerate(kept)}}
''', "no ValueError for max_size < 2", hint="a max_size below 2 cannot hold <pad> and <unk>: raise a ValueError "
                                          "that names the value", loses=SLIP),

    # encode
    Entry("encode_left_pad", "encode", '''
def encode(tokens, vocab, max_len):
    ids = [vocab.get(t, 1) for t in tokens[:max_len]]
    return torch.tensor([0] * (max_len - len(ids)) + ids, dtype=torch.long)
''', "pads on the left", hint="pad on the right: the ids come first, then the zeros", loses=(0.35, 0.9)),
    Entry("encode_unknown_as_pad", "encode", '''
def encode(tokens, vocab, max_len):
    ids = [vocab.get(t, 0) for t in tokens[:max_len]]
    return torch.tensor(ids + [0] * (max_len - len(ids)), dtype=torch.long)
''', "unknown tokens become 0 (pad)", hint="a token missing from the vocabulary becomes <unk> = 1, not 0", loses=MOST),
    Entry("encode_keeps_the_end", "encode", '''
def encode(tokens, vocab, max_len):
    ids = [vocab.get(t, 1) for t in tokens[-max_len:]]
    return torch.tensor(ids + [0] * (max_len - len(ids)), dtype=torch.long)
''', "truncates from the front (keeps the last max_len tokens)",
        hint="truncation keeps the first max_len tokens, not the last ones", loses=(0.4, 1)),
    Entry("encode_float_dtype", "encode", '''
def encode(tokens, vocab, max_len):
    ids = [vocab.get(t, 1) for t in tokens[:max_len]]
    return torch.tensor(ids + [0] * (max_len - len(ids)), dtype=torch.float32)
''', "returns float ids", hint="ids index an embedding table: return a LongTensor (dtype=torch.long)", loses=MOST),
    Entry("encode_no_truncation", "encode", '''
def encode(tokens, vocab, max_len):
    ids = [vocab.get(t, 1) for t in tokens]
    return torch.tensor(ids + [0] * (max_len - len(ids)), dtype=torch.long)
''', "forgets to truncate: long lists give tensors longer than max_len",
        hint="a list longer than max_len must be cut to its first max_len tokens", loses=(0.4, 1)),

    # bag_of_words
    Entry("bow_counts_pad", "bag_of_words", '''
def bag_of_words(ids, vocab_size, binary=True):
    if ids.numel() and int(ids.max()) >= vocab_size:
        raise ValueError(f"id {int(ids.max())} is outside [0, {vocab_size})")
    bags = torch.zeros(ids.shape[0], vocab_size, device=ids.device)
    bags.scatter_add_(1, ids, torch.ones(ids.shape, device=ids.device))
    return (bags > 0).float() if binary else bags
''', "counts the padding in column 0", hint="column 0 is <pad>: padding is not a word, set that column to 0", loses=MOST),
    Entry("bow_default_counts", "bag_of_words", '''
def bag_of_words(ids, vocab_size, binary=False):
    if ids.numel() and int(ids.max()) >= vocab_size:
        raise ValueError(f"id {int(ids.max())} is outside [0, {vocab_size})")
    bags = torch.zeros(ids.shape[0], vocab_size, device=ids.device)
    bags.scatter_add_(1, ids, torch.ones(ids.shape, device=ids.device))
    bags[:, 0] = 0
    return (bags > 0).float() if binary else bags
''', "binary=False as the default", hint="the default is binary=True: presence bits 0/1, not counts", loses=MOST),
    Entry("bow_always_binary", "bag_of_words", '''
def bag_of_words(ids, vocab_size, binary=True):
    if ids.numel() and int(ids.max()) >= vocab_size:
        raise ValueError(f"id {int(ids.max())} is outside [0, {vocab_size})")
    bags = torch.zeros(ids.shape[0], vocab_size, device=ids.device)
    bags.scatter_(1, ids, 1.0)
    bags[:, 0] = 0
    return bags
''', "scatter_ instead of scatter_add_: a repeated word counts once even when binary=False",
        hint="with binary=False a word that occurs twice must count 2: add (scatter_add_), do not overwrite", loses=MOST),
    Entry("bow_width_from_ids", "bag_of_words", '''
def bag_of_words(ids, vocab_size, binary=True):
    if ids.numel() and int(ids.max()) >= vocab_size:
        raise ValueError(f"id {int(ids.max())} is outside [0, {vocab_size})")
    bags = F.one_hot(ids).sum(dim=1).float()
    bags[:, 0] = 0
    return (bags > 0).float() if binary else bags
''', "F.one_hot without num_classes: the width is the largest id + 1, not vocab_size",
        hint="the bags must have vocab_size columns even when the largest id is smaller: pass num_classes", loses=PART),
    Entry("bow_bool_dtype", "bag_of_words", '''
def bag_of_words(ids, vocab_size, binary=True):
    if ids.numel() and int(ids.max()) >= vocab_size:
        raise ValueError(f"id {int(ids.max())} is outside [0, {vocab_size})")
    bags = torch.zeros(ids.shape[0], vocab_size, device=ids.device)
    bags.scatter_add_(1, ids, torch.ones(ids.shape, device=ids.device))
    bags[:, 0] = 0
    return bags > 0 if binary else bags
''', "the binary bag is returned as a bool tensor", hint="return float32 0.0/1.0 values, not booleans: .float()",
          loses=MOST),
    Entry("bow_no_range_check", "bag_of_words", '''
def bag_of_words(ids, vocab_size, binary=True):
    bags = torch.zeros(ids.shape[0], vocab_size, device=ids.device)
    bags.scatter_add_(1, ids, torch.ones(ids.shape, device=ids.device))
    bags[:, 0] = 0
    return (bags > 0).float() if binary else bags
''', "no ValueError for an id >= vocab_size (scatter_add_ raises a RuntimeError instead)",
        hint="check that every id is below vocab_size and raise a ValueError that names the bad id", loses=SLIP),

    # tfidf
    Entry("tfidf_smooth_idf", "tfidf", '''
def tfidf(counts, normalize=True):
    counts = counts if counts.is_floating_point() else counts.float()
    df = (counts > 0).sum(0).to(counts.dtype)
    w = counts * (torch.log((1 + counts.shape[0]) / (1 + df)) + 1)
    return w / w.norm(dim=1, keepdim=True).clamp_min(1e-12) if normalize else w
''', "scikit-learn's smoothed idf log((1 + N) / (1 + df)) + 1",
        hint="use idf = log(N / df) exactly, without scikit-learn's smoothing (+1 terms)", loses=MOST),
    Entry("tfidf_df_plus_one", "tfidf", '''
def tfidf(counts, normalize=True):
    counts = counts if counts.is_floating_point() else counts.float()
    df = (counts > 0).sum(0).to(counts.dtype)
    w = counts * torch.log(counts.shape[0] / (1 + df))
    return w / w.norm(dim=1, keepdim=True).clamp_min(1e-12) if normalize else w
''', "log(N / (1 + df)) to avoid the division by zero", hint="use log(N / df), and put 0 where df = 0 with "
                                                              "torch.where instead of adding 1 to df", loses=MOST),
    Entry("tfidf_df_total_counts", "tfidf", '''
def tfidf(counts, normalize=True):
    counts = counts if counts.is_floating_point() else counts.float()
    df = counts.sum(0)
    idf = torch.where(df > 0, torch.log(counts.shape[0] / df.clamp_min(1e-12)), torch.zeros_like(df))
    w = counts * idf
    return w / w.norm(dim=1, keepdim=True).clamp_min(1e-12) if normalize else w
''', "df as the total count of the word instead of the number of documents containing it",
        hint="df is the number of documents (rows) that contain the word at least once, not its total count", loses=MOST),
    Entry("tfidf_nan_for_df_zero", "tfidf", '''
def tfidf(counts, normalize=True):
    counts = counts if counts.is_floating_point() else counts.float()
    df = (counts > 0).sum(0).to(counts.dtype)
    w = counts * torch.log(counts.shape[0] / df)
    return w / w.norm(dim=1, keepdim=True).clamp_min(1e-12) if normalize else w
''', "no guard for df = 0: 0 * log(N / 0) = 0 * inf = nan",
        hint="a word that no document contains (df = 0, such as <pad>) makes log(N / 0) infinite: put 0 there", loses=MOST),
    Entry("tfidf_normalize_columns", "tfidf", '''
def tfidf(counts, normalize=True):
    counts = counts if counts.is_floating_point() else counts.float()
    df = (counts > 0).sum(0)
    idf = torch.where(df > 0, torch.log(counts.shape[0] / df.clamp_min(1).to(counts.dtype)), 0.0)
    w = counts * idf
    return w / w.norm(dim=0, keepdim=True).clamp_min(1e-12) if normalize else w
''', "normalises the columns (dim=0) instead of the rows",
        hint="normalise each row (document), not each column: every document vector must have length 1", loses=MOST),
    Entry("tfidf_l1_normalize", "tfidf", '''
def tfidf(counts, normalize=True):
    counts = counts if counts.is_floating_point() else counts.float()
    df = (counts > 0).sum(0)
    idf = torch.where(df > 0, torch.log(counts.shape[0] / df.clamp_min(1).to(counts.dtype)), 0.0)
    w = counts * idf
    return w / w.abs().sum(dim=1, keepdim=True).clamp_min(1e-12) if normalize else w
''', "L1 instead of L2 normalisation", hint="divide each row by its L2 norm (square root of the sum of squares), "
                                          "not by its sum", loses=MOST),
    Entry("tfidf_zero_row_nan", "tfidf", '''
def tfidf(counts, normalize=True):
    counts = counts if counts.is_floating_point() else counts.float()
    df = (counts > 0).sum(0)
    idf = torch.where(df > 0, torch.log(counts.shape[0] / df.clamp_min(1).to(counts.dtype)), 0.0)
    w = counts * idf
    return w / w.norm(dim=1, keepdim=True) if normalize else w
''', "divides by the row norm without a guard: an all-zero row becomes 0 / 0 = nan",
        hint="a document whose weights are all 0 must stay 0, not become nan: guard the division by a zero norm",
        loses=(0.5, 1)),
    Entry("tfidf_log10", "tfidf", '''
def tfidf(counts, normalize=True):
    counts = counts if counts.is_floating_point() else counts.float()
    df = (counts > 0).sum(0)
    idf = torch.where(df > 0, torch.log10(counts.shape[0] / df.clamp_min(1).to(counts.dtype)), 0.0)
    w = counts * idf
    return w / w.norm(dim=1, keepdim=True).clamp_min(1e-12) if normalize else w
''', "log10 instead of the natural log (invisible after normalisation)",
        hint="use the natural logarithm (torch.log), not log10", loses=MOST),
    Entry("tfidf_binary_tf", "tfidf", '''
def tfidf(counts, normalize=True):
    counts = counts if counts.is_floating_point() else counts.float()
    df = (counts > 0).sum(0)
    idf = torch.where(df > 0, torch.log(counts.shape[0] / df.clamp_min(1).to(counts.dtype)), 0.0)
    w = (counts > 0).to(counts.dtype) * idf
    return w / w.norm(dim=1, keepdim=True).clamp_min(1e-12) if normalize else w
''', "uses presence (counts > 0) as tf instead of the counts",
        hint="tf is the count itself: a word that occurs twice weighs twice as much", loses=MOST),
    Entry("tfidf_tf_by_length", "tfidf", '''
def tfidf(counts, normalize=True):
    counts = counts if counts.is_floating_point() else counts.float()
    df = (counts > 0).sum(0)
    idf = torch.where(df > 0, torch.log(counts.shape[0] / df.clamp_min(1).to(counts.dtype)), 0.0)
    w = counts / counts.sum(1, keepdim=True).clamp_min(1e-12) * idf
    return w / w.norm(dim=1, keepdim=True).clamp_min(1e-12) if normalize else w
''', "divides tf by the document length (invisible with normalize=True)",
        hint="tf is the raw count: do not divide it by the length of the document", loses=MOST),
    Entry("tfidf_always_normalized", "tfidf", '''
def tfidf(counts, normalize=True):
    counts = counts if counts.is_floating_point() else counts.float()
    df = (counts > 0).sum(0)
    idf = torch.where(df > 0, torch.log(counts.shape[0] / df.clamp_min(1).to(counts.dtype)), 0.0)
    w = counts * idf
    return w / w.norm(dim=1, keepdim=True).clamp_min(1e-12)
''', "ignores normalize=False", hint="with normalize=False return tf * idf without dividing by the row norms", loses=MOST),
    Entry("tfidf_n_from_columns", "tfidf", '''
def tfidf(counts, normalize=True):
    counts = counts if counts.is_floating_point() else counts.float()
    df = (counts > 0).sum(0)
    idf = torch.where(df > 0, torch.log(counts.shape[1] / df.clamp_min(1).to(counts.dtype)), 0.0)
    w = counts * idf
    return w / w.norm(dim=1, keepdim=True).clamp_min(1e-12) if normalize else w
''', "N taken from the vocabulary size (shape[1]) instead of the number of documents",
        hint="N is the number of documents, the number of rows: counts.shape[0]", loses=MOST),
    Entry("tfidf_always_float32", "tfidf", '''
def tfidf(counts, normalize=True):
    counts = counts.float()
    df = (counts > 0).sum(0)
    idf = torch.where(df > 0, torch.log(counts.shape[0] / df.clamp_min(1).float()), torch.zeros(()))
    w = counts * idf
    return w / w.norm(dim=1, keepdim=True).clamp_min(1e-12) if normalize else w
''', "casts float64 counts to float32", hint="keep the dtype of floating counts: float64 in, float64 out", loses=MOST),

    # MeanEmbeddingClassifier
    Entry("mec_mean_over_pads", "MeanEmbeddingClassifier", '''
class MeanEmbeddingClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_classes=1):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.classifier = nn.Linear(embed_dim, num_classes)

    def forward(self, ids):
        logits = self.classifier(self.embedding(ids).mean(dim=1))
        return logits.squeeze(-1) if self.num_classes == 1 else logits
''', "averages over every position, padding included",
        hint="your mean includes the <pad> positions; average over the real tokens only (ids != 0)", loses=MOST),
    Entry("mec_padding_idx_mean_over_all", "MeanEmbeddingClassifier", '''
class MeanEmbeddingClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_classes=1):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.classifier = nn.Linear(embed_dim, num_classes)

    def forward(self, ids):
        logits = self.classifier(self.embedding(ids).mean(dim=1))
        return logits.squeeze(-1) if self.num_classes == 1 else logits
''', "padding_idx=0 zeroes the pad vector, but the mean still divides by the padded length",
        hint="padding_idx=0 makes the pad vectors zero, but the mean still divides by the padded length: divide "
             "by the number of real tokens", loses=MOST),
    Entry("mec_sum", "MeanEmbeddingClassifier", '''
class MeanEmbeddingClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_classes=1):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.classifier = nn.Linear(embed_dim, num_classes)

    def forward(self, ids):
        mask = (ids != 0).unsqueeze(-1).to(self.embedding.weight.dtype)
        logits = self.classifier((self.embedding(ids) * mask).sum(dim=1))
        return logits.squeeze(-1) if self.num_classes == 1 else logits
''', "sums the real embeddings without dividing by their number",
        hint="divide the masked sum by the number of real tokens of each row to get the mean", loses=MOST),
    Entry("mec_squeeze_all", "MeanEmbeddingClassifier", '''
class MeanEmbeddingClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_classes=1):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.classifier = nn.Linear(embed_dim, num_classes)

    def forward(self, ids):
        mask = (ids != 0).unsqueeze(-1).to(self.embedding.weight.dtype)
        mean = (self.embedding(ids) * mask).sum(dim=1) / mask.sum(dim=1)
        return self.classifier(mean).squeeze()
''', "squeeze() also drops the batch dimension of a batch of one",
        hint="a batch of one must give logits of shape (1,): squeeze(-1) only when num_classes == 1", loses=SLIP),
    Entry("mec_no_squeeze", "MeanEmbeddingClassifier", '''
class MeanEmbeddingClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_classes=1):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.classifier = nn.Linear(embed_dim, num_classes)

    def forward(self, ids):
        mask = (ids != 0).unsqueeze(-1).to(self.embedding.weight.dtype)
        return self.classifier((self.embedding(ids) * mask).sum(dim=1) / mask.sum(dim=1))
''', "returns (B, 1) for one class", hint="with num_classes == 1 return logits of shape (B,): squeeze the last "
                                        "dimension", loses=MOST),
    Entry("mec_max_pool", "MeanEmbeddingClassifier", '''
class MeanEmbeddingClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_classes=1):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.classifier = nn.Linear(embed_dim, num_classes)

    def forward(self, ids):
        emb = self.embedding(ids).masked_fill((ids == 0).unsqueeze(-1), float("-inf"))
        logits = self.classifier(emb.max(dim=1).values)
        return logits.squeeze(-1) if self.num_classes == 1 else logits
''', "max-pools instead of averaging", hint="pool with the mean of the real embeddings, not the maximum", loses=MOST),
    Entry("mec_mask_unk", "MeanEmbeddingClassifier", '''
class MeanEmbeddingClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_classes=1):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.classifier = nn.Linear(embed_dim, num_classes)

    def forward(self, ids):
        mask = (ids > 1).unsqueeze(-1).to(self.embedding.weight.dtype)
        mean = (self.embedding(ids) * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1)
        logits = self.classifier(mean)
        return logits.squeeze(-1) if self.num_classes == 1 else logits
''', "leaves <unk> (id 1) out of the mean as if it were padding",
        hint="only <pad> (id 0) is left out of the mean; <unk> is a real token", loses=(0.4, 1)),
    Entry("mec_detached_mean", "MeanEmbeddingClassifier", '''
class MeanEmbeddingClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_classes=1):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.classifier = nn.Linear(embed_dim, num_classes)

    def forward(self, ids):
        mask = (ids != 0).unsqueeze(-1).to(self.embedding.weight.dtype)
        mean = ((self.embedding(ids) * mask).sum(dim=1) / mask.sum(dim=1)).detach()
        logits = self.classifier(mean)
        return logits.squeeze(-1) if self.num_classes == 1 else logits
''', "detaches the mean: the embeddings never learn",
        hint="the embeddings receive no gradient: do not .detach() (or use .data) on the way to the logits", loses=MOST),
]

# ----------------------------------------------------------------------------------------------- variants
VARIANTS = [
    Entry("tokenize_nonspace_alternative", "tokenize", '''
def tokenize(text):
    return re.findall(r"[\\w']+|\\S", text.lower())
''', "\\S after the run alternative matches exactly the non-word, non-space characters"),
    Entry("tokenize_char_loop", "tokenize", '''
def tokenize(text):
    tokens, run = [], ""
    for ch in text.lower():
        if ch.isalnum() or ch in "_'":
            run += ch
            continue
        if run:
            tokens.append(run)
            run = ""
        if not ch.isspace():
            tokens.append(ch)
    if run:
        tokens.append(run)
    return tokens
''', "a loop over characters with str.isalnum (what \\w means in Python)"),
    Entry("tokenize_lower_each_token", "tokenize", '''
def tokenize(text):
    return [m.group(0).lower() for m in re.finditer(r"(?:\\w|')+|[^\\w\\s]", text)]
''', "finditer on the original text, each token lowercased"),
    Entry("vocab_two_stable_sorts", "build_vocab", '''
def build_vocab(token_lists, max_size=None, min_freq=1):
    if max_size is not None and max_size < 2:
        raise ValueError(f"max_size={max_size} must be at least 2")
    counts = {}
    for tokens in token_lists:
        for t in tokens:
            counts[t] = counts.get(t, 0) + 1
    items = sorted(counts.items())
    items.sort(key=lambda kv: kv[1], reverse=True)  # stable: alphabetical order survives among ties
    vocab = {"<pad>": 0, "<unk>": 1}
    for t, c in items:
        if max_size is not None and len(vocab) >= max_size:
            break
        if c >= min_freq:
            vocab[t] = len(vocab)
    return vocab
''', "alphabetical sort, then a stable sort by count; plain dict counting; max_size checked in the loop"),
    Entry("vocab_cut_then_filter", "build_vocab", '''
def build_vocab(token_lists, max_size=None, min_freq=1):
    if max_size is not None and max_size < 2:
        raise ValueError(f"max_size={max_size} must be at least 2")
    counts = Counter(t for tokens in token_lists for t in tokens)
    ordered = sorted(counts, key=lambda t: (-counts[t], t))
    if max_size is not None:
        ordered = ordered[: max_size - 2]
    kept = [t for t in ordered if counts[t] >= min_freq]  # a prefix anyway: counts descend
    return dict(zip(["<pad>", "<unk>", *kept], range(len(kept) + 2)))
''', "cuts to max_size before applying min_freq (the same result, the counts descend)"),
    Entry("encode_tensor_fill", "encode", '''
def encode(tokens, vocab, max_len):
    out = torch.zeros(max_len, dtype=torch.long)
    for i, t in enumerate(tokens[:max_len]):
        out[i] = vocab[t] if t in vocab else vocab["<unk>"]
    return out
''', "fills a zero tensor; the <unk> id read from the vocabulary"),
    Entry("encode_pad_function", "encode", '''
def encode(tokens, vocab, max_len):
    ids = torch.tensor([vocab.get(t, 1) for t in tokens], dtype=torch.long)[:max_len]
    return F.pad(ids, (0, max_len - len(ids)), value=0)
''', "F.pad on the right"),
    Entry("bow_one_hot", "bag_of_words", '''
def bag_of_words(ids, vocab_size, binary=True):
    if ((ids < 0) | (ids >= vocab_size)).any():
        bad = ids[(ids < 0) | (ids >= vocab_size)][0].item()
        raise ValueError(f"bag_of_words: id {bad} not in [0, {vocab_size})")
    counts = F.one_hot(ids, vocab_size).sum(dim=1).float()  # (B, L, V) -> (B, V)
    counts[:, 0] = 0
    return counts.clamp(max=1) if binary else counts
''', "F.one_hot with num_classes, summed over the positions; clamp for the binary bag"),
    Entry("bow_bincount_rows", "bag_of_words", '''
def bag_of_words(ids, vocab_size, binary=True):
    if ids.numel() and ids.max().item() >= vocab_size:
        raise ValueError(f"found id {ids.max().item()} but vocab_size is {vocab_size}")
    rows = [torch.bincount(row[row != 0], minlength=vocab_size).float() for row in ids]
    bags = torch.stack(rows) if rows else torch.zeros(0, vocab_size)
    return (bags > 0).float() if binary else bags
''', "torch.bincount per row on the non-pad ids"),
    Entry("bow_offsets_bincount", "bag_of_words", '''
def bag_of_words(ids, vocab_size, binary=True):
    if ids.numel() and ids.max().item() >= vocab_size:
        raise ValueError(f"id {ids.max().item()} >= vocab_size={vocab_size}")
    b = ids.shape[0]
    flat = (ids + vocab_size * torch.arange(b, device=ids.device)[:, None]).flatten()  # (B * L,)
    bags = torch.bincount(flat, minlength=b * vocab_size).view(b, vocab_size).float()  # (B, V)
    bags[:, 0] = 0
    return bags.bool().float() if binary else bags
''', "one bincount over row-offset ids"),
    Entry("tfidf_normalize_function", "tfidf", '''
def tfidf(counts, normalize=True):
    x = counts.to(counts.dtype if counts.is_floating_point() else torch.float32)
    n = x.shape[0]
    df = x.gt(0).sum(0).to(x.dtype)
    idf = torch.log(n / df)
    idf[df == 0] = 0.0
    w = x * idf
    return F.normalize(w, p=2, dim=1) if normalize else w
''', "inf idf zeroed by indexing, F.normalize for the rows"),
    Entry("tfidf_log_difference", "tfidf", '''
def tfidf(counts, normalize=True):
    x = counts.double() if counts.dtype == torch.float64 else counts.float()
    df = (x != 0).sum(0)
    idf = torch.zeros(x.shape[1], dtype=x.dtype, device=x.device)
    present = df > 0
    idf[present] = math.log(x.shape[0]) - torch.log(df[present].to(x.dtype))
    w = x * idf
    if normalize:
        norms = torch.sqrt((w ** 2).sum(1, keepdim=True))
        w = torch.where(norms > 0, w / torch.where(norms > 0, norms, torch.ones_like(norms)), torch.zeros_like(w))
    return w
''', "log N - log df on the present columns, sqrt of the sum of squares with a where guard"),
    Entry("mec_classify_then_mean", "MeanEmbeddingClassifier", '''
class MeanEmbeddingClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_classes=1):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.classifier = nn.Linear(embed_dim, num_classes)

    def forward(self, ids):
        per_token = self.classifier(self.embedding(ids))  # (B, L, C): a linear layer commutes with the mean
        real = (ids != 0).to(per_token.dtype)  # (B, L)
        logits = torch.einsum("blc,bl->bc", per_token, real) / real.sum(1, keepdim=True)
        return logits[:, 0] if self.num_classes == 1 else logits
''', "the classifier on every token, then the mean of the logits (linear maps commute with the mean)"),
    Entry("mec_padding_idx_lengths", "MeanEmbeddingClassifier", '''
class MeanEmbeddingClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_classes=1):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.classifier = nn.Linear(embed_dim, num_classes)

    def forward(self, ids):
        emb = self.embedding(ids) * (ids != 0).unsqueeze(-1)
        lengths = (ids != 0).sum(dim=1, keepdim=True)
        out = self.classifier(emb.sum(1) / lengths)
        return out.view(-1) if self.num_classes == 1 else out
''', "padding_idx=0, masked sum divided by the lengths, view(-1)"),
    Entry("mec_row_loop", "MeanEmbeddingClassifier", '''
class MeanEmbeddingClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_classes=1):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.classifier = nn.Linear(embed_dim, num_classes)

    def forward(self, ids):
        means = torch.stack([self.embedding(row[row != 0]).mean(0) for row in ids])
        logits = self.classifier(means)
        return logits.squeeze(-1) if self.num_classes == 1 else logits
''', "a Python loop over the rows, dropping the pads"),
]
