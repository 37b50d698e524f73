"""Lab 04 catalogue: the mistakes students make (MUTANTS) and correct alternatives (VARIANTS).

Each entry's ``source`` is run after the reference code and redefines one or more graded names; the rest of
the reference picks the new definition up (``ElmanRNN`` calls whatever ``rnn_cell`` is defined,
``RNNClassifier`` whatever ``last_valid_state``). A mutant must lose points on ``question``; a variant must
keep full marks on every question.
"""

from attnlab.grading.core.mutants import ALL, MOST, PART, SLIP, Entry

# ------------------------------------------------------------------------------------------------ mutants
MUTANTS = [
    # rnn_cell
    Entry("rnn_cell_no_tanh", "rnn_cell", '''
def rnn_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    return x_t @ W_ih.T + b_ih + h_prev @ W_hh.T + b_hh
''', "forgets the tanh: a linear recurrence",
          hint="your h_t is the pre-activation: apply torch.tanh to the sum", loses=MOST),
    Entry("rnn_cell_relu", "rnn_cell", '''
def rnn_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    return torch.relu(x_t @ W_ih.T + b_ih + h_prev @ W_hh.T + b_hh)
''', "ReLU instead of tanh (nn.RNN's nonlinearity='relu', not the default)",
          hint="your h_t looks like a ReLU of the pre-activation; the Elman cell uses tanh", loses=MOST),
    Entry("rnn_cell_one_bias", "rnn_cell", '''
def rnn_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    return torch.tanh(x_t @ W_ih.T + h_prev @ W_hh.T + b_ih)
''', "drops b_hh, since one bias 'should be enough'",
          hint="both biases count: add b_ih and b_hh", loses=MOST),
    Entry("rnn_cell_weights_not_transposed", "rnn_cell", '''
def rnn_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    return torch.tanh(x_t @ W_ih.T + b_ih + h_prev @ W_hh + b_hh)
''', "h_prev @ W_hh without the transpose: runs (W_hh is square) but uses the transposed matrix",
          hint="W_hh is stored (H_out, H_in) like W_ih: multiply rows with h_prev @ W_hh.T", loses=MOST),

    # ElmanRNN
    Entry("elman_h0_ignored", "ElmanRNN", '''
class ElmanRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        k = 1.0 / math.sqrt(hidden_size)
        self.weight_ih_l0 = nn.Parameter(torch.empty(hidden_size, input_size).uniform_(-k, k))
        self.weight_hh_l0 = nn.Parameter(torch.empty(hidden_size, hidden_size).uniform_(-k, k))
        self.bias_ih_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-k, k))
        self.bias_hh_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-k, k))

    def forward(self, x, h0=None):
        h = x.new_zeros(x.shape[0], self.hidden_size)
        states = []
        for t in range(x.shape[1]):
            h = rnn_cell(x[:, t], h, self.weight_ih_l0, self.weight_hh_l0, self.bias_ih_l0, self.bias_hh_l0)
            states.append(h)
        return torch.stack(states, dim=1), h
''', "always starts from zeros, ignoring a given h0",
          hint="when h0 is given, start the recurrence from it; zeros only when h0 is None", loses=PART),
    Entry("elman_time_first", "ElmanRNN", '''
class ElmanRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        k = 1.0 / math.sqrt(hidden_size)
        self.weight_ih_l0 = nn.Parameter(torch.empty(hidden_size, input_size).uniform_(-k, k))
        self.weight_hh_l0 = nn.Parameter(torch.empty(hidden_size, hidden_size).uniform_(-k, k))
        self.bias_ih_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-k, k))
        self.bias_hh_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-k, k))

    def forward(self, x, h0=None):
        x = x.transpose(0, 1)  # treats the input as time-first (nn.RNN's default), then transposes back
        h = x.new_zeros(x.shape[1], self.hidden_size) if h0 is None else h0
        states = []
        for t in range(x.shape[0]):
            h = rnn_cell(x[t], h, self.weight_ih_l0, self.weight_hh_l0, self.bias_ih_l0, self.bias_hh_l0)
            states.append(h)
        return torch.stack(states, dim=0), h
''', "loops over time correctly but returns the outputs time-first (T, B, H), as nn.RNN does by default",
          hint="outputs must be batch-first, (B, T, H): stack the states along dim=1", loses=MOST),
    Entry("elman_loops_over_batch", "ElmanRNN", '''
class ElmanRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        k = 1.0 / math.sqrt(hidden_size)
        self.weight_ih_l0 = nn.Parameter(torch.empty(hidden_size, input_size).uniform_(-k, k))
        self.weight_hh_l0 = nn.Parameter(torch.empty(hidden_size, hidden_size).uniform_(-k, k))
        self.bias_ih_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-k, k))
        self.bias_hh_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-k, k))

    def forward(self, x, h0=None):
        h = x.new_zeros(x.shape[1], self.hidden_size) if h0 is None else h0
        states = []
        for t in range(x.shape[0]):  # x[t] is a batch row, not a time step
            h = rnn_cell(x[t], h, self.weight_ih_l0, self.weight_hh_l0, self.bias_ih_l0, self.bias_hh_l0)
            states.append(h)
        return torch.stack(states, dim=0), h
''', "indexes x[t] on the first dimension (the batch) as if the input were time-first",
          hint="x is batch-first (B, T, D): the time steps run along the second axis, not the first", loses=MOST),
    Entry("elman_outputs_shifted", "ElmanRNN", '''
class ElmanRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        k = 1.0 / math.sqrt(hidden_size)
        self.weight_ih_l0 = nn.Parameter(torch.empty(hidden_size, input_size).uniform_(-k, k))
        self.weight_hh_l0 = nn.Parameter(torch.empty(hidden_size, hidden_size).uniform_(-k, k))
        self.bias_ih_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-k, k))
        self.bias_hh_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-k, k))

    def forward(self, x, h0=None):
        h = x.new_zeros(x.shape[0], self.hidden_size) if h0 is None else h0
        states = []
        for t in range(x.shape[1]):
            states.append(h)  # the state *before* the step
            h = rnn_cell(x[:, t], h, self.weight_ih_l0, self.weight_hh_l0, self.bias_ih_l0, self.bias_hh_l0)
        return torch.stack(states, dim=1), h
''', "stores the state before each step: outputs shifted by one (h0 first, h_T missing)",
          hint="the output at step t is the state after reading step t: record h after the update, not before it",
          loses=MOST),
    Entry("elman_h_T_with_layer_dim", "ElmanRNN", '''
class ElmanRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        k = 1.0 / math.sqrt(hidden_size)
        self.weight_ih_l0 = nn.Parameter(torch.empty(hidden_size, input_size).uniform_(-k, k))
        self.weight_hh_l0 = nn.Parameter(torch.empty(hidden_size, hidden_size).uniform_(-k, k))
        self.bias_ih_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-k, k))
        self.bias_hh_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-k, k))

    def forward(self, x, h0=None):
        h = x.new_zeros(x.shape[0], self.hidden_size) if h0 is None else h0
        states = []
        for t in range(x.shape[1]):
            h = rnn_cell(x[:, t], h, self.weight_ih_l0, self.weight_hh_l0, self.bias_ih_l0, self.bias_hh_l0)
            states.append(h)
        return torch.stack(states, dim=1), h.unsqueeze(0)
''', "returns h_T as (1, B, H), copying nn.RNN's h_n",
          hint="h_T has shape (B, H) here, without nn.RNN's extra layer dimension", loses=MOST),
    Entry("elman_weights_swapped_names", "ElmanRNN", '''
class ElmanRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        k = 1.0 / math.sqrt(hidden_size)
        self.weight_ih_l0 = nn.Parameter(torch.empty(input_size, hidden_size).uniform_(-k, k))
        self.weight_hh_l0 = nn.Parameter(torch.empty(hidden_size, hidden_size).uniform_(-k, k))
        self.bias_ih_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-k, k))
        self.bias_hh_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-k, k))

    def forward(self, x, h0=None):
        h = x.new_zeros(x.shape[0], self.hidden_size) if h0 is None else h0
        states = []
        for t in range(x.shape[1]):
            h = torch.tanh(x[:, t] @ self.weight_ih_l0 + self.bias_ih_l0 + h @ self.weight_hh_l0.T + self.bias_hh_l0)
            states.append(h)
        return torch.stack(states, dim=1), h
''', "stores weight_ih_l0 as (input_size, hidden_size), the transpose of nn.RNN's layout",
          hint="weight_ih_l0 must have nn.RNN's shape (hidden_size, input_size) so that its weights load into yours",
          loses=MOST),
    Entry("elman_uses_nn_rnn", "ElmanRNN", '''
class ElmanRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.rnn = nn.RNN(input_size, hidden_size, batch_first=True)
        self.weight_ih_l0 = self.rnn.weight_ih_l0
        self.weight_hh_l0 = self.rnn.weight_hh_l0
        self.bias_ih_l0 = self.rnn.bias_ih_l0
        self.bias_hh_l0 = self.rnn.bias_hh_l0

    def forward(self, x, h0=None):
        out, h_n = self.rnn(x, None if h0 is None else h0[None])
        return out, h_n[0]
''', "wraps nn.RNN, which the lab forbids (extra parameter names rnn.* also show)",
          hint="nn.RNN is not allowed here: loop over the time steps with your rnn_cell", loses=ALL),

    # lstm_cell
    Entry("lstm_gates_ifog", "lstm_cell", '''
def lstm_cell(x_t, h_prev, c_prev, W_ih, W_hh, b_ih, b_hh):
    z = x_t @ W_ih.T + b_ih + h_prev @ W_hh.T + b_hh
    z_i, z_f, z_o, z_g = z.chunk(4, dim=-1)
    c_t = torch.sigmoid(z_f) * c_prev + torch.sigmoid(z_i) * torch.tanh(z_g)
    return torch.sigmoid(z_o) * torch.tanh(c_t), c_t
''', "gates in the order i, f, o, g (many blog posts) instead of PyTorch's i, f, g, o",
          hint="PyTorch stacks the gates as i, f, g, o: the candidate g is the third block, the output gate o the fourth",
          loses=MOST),
    Entry("lstm_gates_fiog", "lstm_cell", '''
def lstm_cell(x_t, h_prev, c_prev, W_ih, W_hh, b_ih, b_hh):
    z = x_t @ W_ih.T + b_ih + h_prev @ W_hh.T + b_hh
    z_f, z_i, z_g, z_o = z.chunk(4, dim=-1)
    c_t = torch.sigmoid(z_f) * c_prev + torch.sigmoid(z_i) * torch.tanh(z_g)
    return torch.sigmoid(z_o) * torch.tanh(c_t), c_t
''', "input and forget gates swapped",
          hint="the first block of rows is the input gate i, the second the forget gate f", loses=MOST),
    Entry("lstm_sigmoid_on_g", "lstm_cell", '''
def lstm_cell(x_t, h_prev, c_prev, W_ih, W_hh, b_ih, b_hh):
    z = x_t @ W_ih.T + b_ih + h_prev @ W_hh.T + b_hh
    i, f, g, o = torch.sigmoid(z).chunk(4, dim=-1)
    c_t = f * c_prev + i * g
    return o * torch.tanh(c_t), c_t
''', "sigmoid on all four blocks, the candidate g included",
          hint="the candidate g uses tanh (it must be able to be negative); only i, f and o are sigmoids", loses=MOST),
    Entry("lstm_h_from_c_prev", "lstm_cell", '''
def lstm_cell(x_t, h_prev, c_prev, W_ih, W_hh, b_ih, b_hh):
    z = x_t @ W_ih.T + b_ih + h_prev @ W_hh.T + b_hh
    z_i, z_f, z_g, z_o = z.chunk(4, dim=-1)
    c_t = torch.sigmoid(z_f) * c_prev + torch.sigmoid(z_i) * torch.tanh(z_g)
    return torch.sigmoid(z_o) * torch.tanh(c_prev), c_t
''', "h_t computed from the old cell c_prev",
          hint="h_t = o * tanh(c_t) uses the new cell state c_t, not c_prev", loses=MOST),
    Entry("lstm_no_tanh_on_c", "lstm_cell", '''
def lstm_cell(x_t, h_prev, c_prev, W_ih, W_hh, b_ih, b_hh):
    z = x_t @ W_ih.T + b_ih + h_prev @ W_hh.T + b_hh
    z_i, z_f, z_g, z_o = z.chunk(4, dim=-1)
    c_t = torch.sigmoid(z_f) * c_prev + torch.sigmoid(z_i) * torch.tanh(z_g)
    return torch.sigmoid(z_o) * c_t, c_t
''', "h_t = o * c_t without the tanh",
          hint="h_t = o * tanh(c_t): squash the cell state with tanh before the output gate", loses=MOST),
    Entry("lstm_no_forget_gate", "lstm_cell", '''
def lstm_cell(x_t, h_prev, c_prev, W_ih, W_hh, b_ih, b_hh):
    z = x_t @ W_ih.T + b_ih + h_prev @ W_hh.T + b_hh
    z_i, z_f, z_g, z_o = z.chunk(4, dim=-1)
    c_t = c_prev + torch.sigmoid(z_i) * torch.tanh(z_g)
    return torch.sigmoid(z_o) * torch.tanh(c_t), c_t
''', "c_t = c_prev + i * g: the forget gate is computed but never used",
          hint="c_t = f * c_prev + i * g: multiply the old cell by the forget gate", loses=MOST),
    Entry("lstm_chunk_wrong_dim", "lstm_cell", '''
def lstm_cell(x_t, h_prev, c_prev, W_ih, W_hh, b_ih, b_hh):
    z = x_t @ W_ih.T + b_ih + h_prev @ W_hh.T + b_hh
    z_i, z_f, z_g, z_o = z.reshape(z.shape[0], -1, 4).unbind(-1)  # interleaved instead of blocks
    c_t = torch.sigmoid(z_f) * c_prev + torch.sigmoid(z_i) * torch.tanh(z_g)
    return torch.sigmoid(z_o) * torch.tanh(c_t), c_t
''', "splits z into interleaved gates (every 4th unit) instead of four contiguous blocks",
          hint="the gates are four contiguous blocks of H units (input, forget, cell, output), not every fourth unit",
          loses=MOST),
    Entry("lstm_uses_torch_lstm_cell", "lstm_cell", '''
def lstm_cell(x_t, h_prev, c_prev, W_ih, W_hh, b_ih, b_hh):
    return torch.lstm_cell(x_t, (h_prev, c_prev), W_ih, W_hh, b_ih, b_hh)
''', "calls torch.lstm_cell (the built-in), which the lab forbids",
          hint="torch.lstm_cell and nn.LSTMCell are not allowed: compute the four gates yourself", loses=ALL),

    # last_valid_state
    Entry("last_state_minus_one", "last_valid_state", '''
def last_valid_state(outputs, lengths):
    return outputs[:, -1]
''', "outputs[:, -1]: the state after the last position, padding included",
          hint=("the last column of outputs is the last real state only for rows without padding: a row's last real "
                "step is its length - 1"), loses=MOST),
    Entry("last_state_off_by_one", "last_valid_state", '''
def last_valid_state(outputs, lengths):
    return outputs[torch.arange(outputs.shape[0]), lengths.clamp(max=outputs.shape[1] - 1)]
''', "indexes with lengths instead of lengths - 1 (clamped so that full rows do not crash)",
          hint="a row with n real tokens has its last real state at position n - 1, not n", loses=MOST),
    Entry("last_state_column_indexing", "last_valid_state", '''
def last_valid_state(outputs, lengths):
    return outputs[:, lengths - 1]
''', "outputs[:, lengths - 1] picks every row's positions for every row: shape (B, B, H)",
          hint=("you take every row's last position from every row: each row b needs only its own last real position,"
                " lengths[b] - 1"), loses=MOST),

    # RNNClassifier
    Entry("classifier_h_n_of_padded_batch", "RNNClassifier", '''
class RNNClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_size, num_classes=1):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_size, batch_first=True)
        self.classifier = nn.Linear(hidden_size, num_classes)

    def forward(self, ids, lengths):
        _, (h_n, _) = self.lstm(self.embedding(ids))
        logits = self.classifier(h_n[0])
        return logits.squeeze(-1) if self.num_classes == 1 else logits
''', "classifies h_n of the padded batch: the state after the padding, lengths ignored",
          hint="nn.LSTM's h_n is the state after the last position, padding included: pick each row's last "
               "real state with last_valid_state(outputs, lengths)", loses=MOST),
    Entry("classifier_squeeze_all", "RNNClassifier", '''
class RNNClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_size, num_classes=1):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_size, batch_first=True)
        self.classifier = nn.Linear(hidden_size, num_classes)

    def forward(self, ids, lengths):
        outputs, _ = self.lstm(self.embedding(ids))
        return self.classifier(last_valid_state(outputs, lengths)).squeeze()
''', "squeeze() drops the batch dimension of a batch of one",
          hint="for a batch of one your logits lose their batch dimension: use squeeze(-1), not squeeze()", loses=SLIP),
    Entry("classifier_time_first_lstm", "RNNClassifier", '''
class RNNClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_size, num_classes=1):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_size)
        self.classifier = nn.Linear(hidden_size, num_classes)

    def forward(self, ids, lengths):
        outputs, _ = self.lstm(self.embedding(ids))
        logits = self.classifier(last_valid_state(outputs, lengths))
        return logits.squeeze(-1) if self.num_classes == 1 else logits
''', "nn.LSTM without batch_first=True: reads the batch dimension as time",
          hint="build the LSTM with batch_first=True: your embeddings are (B, L, E), and without it nn.LSTM "
               "reads the batch as the time axis", loses=MOST),
    Entry("classifier_mean_of_states", "RNNClassifier", '''
class RNNClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_size, num_classes=1):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_size, batch_first=True)
        self.classifier = nn.Linear(hidden_size, num_classes)

    def forward(self, ids, lengths):
        outputs, _ = self.lstm(self.embedding(ids))
        logits = self.classifier(outputs.mean(dim=1))
        return logits.squeeze(-1) if self.num_classes == 1 else logits
''', "the mean of all the states (pads included) instead of the last real one",
          hint="classify the state after each row's last real token (last_valid_state), not the mean of all states",
          loses=MOST),

    # attention_context
    Entry("attention_softmax_over_batch", "attention_context", '''
def attention_context(decoder_state, encoder_states, mask=None):
    scores = (encoder_states @ decoder_state.unsqueeze(-1)).squeeze(-1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=0)
    return (weights.unsqueeze(1) @ encoder_states).squeeze(1), weights
''', "softmax over dim=0 (the batch) instead of the positions",
          hint="your weights sum to 1 down each column (over the batch): take the softmax over the positions, dim=-1",
          loses=MOST),
    Entry("attention_mask_ignored", "attention_context", '''
def attention_context(decoder_state, encoder_states, mask=None):
    scores = (encoder_states @ decoder_state.unsqueeze(-1)).squeeze(-1)
    weights = torch.softmax(scores, dim=-1)
    return (weights.unsqueeze(1) @ encoder_states).squeeze(1), weights
''', "never uses the mask",
          hint="masked positions still get weight: fill their scores with -inf before the softmax", loses=(0.3, 0.85)),
    Entry("attention_mask_after_softmax", "attention_context", '''
def attention_context(decoder_state, encoder_states, mask=None):
    scores = (encoder_states @ decoder_state.unsqueeze(-1)).squeeze(-1)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask
    return (weights.unsqueeze(1) @ encoder_states).squeeze(1), weights
''', "zeroes masked weights after the softmax: rows no longer sum to 1",
          hint="masking after the softmax leaves rows that do not sum to 1: mask the scores (-inf) before it",
          loses=(0.3, 0.85)),
    Entry("attention_masked_fill_zero", "attention_context", '''
def attention_context(decoder_state, encoder_states, mask=None):
    scores = (encoder_states @ decoder_state.unsqueeze(-1)).squeeze(-1)
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)
    weights = torch.softmax(scores, dim=-1)
    return (weights.unsqueeze(1) @ encoder_states).squeeze(1), weights
''', "masked scores set to 0 instead of -inf: exp(0) = 1, masked positions keep weight",
          hint="a masked score of 0 still gets weight exp(0) = 1: use float('-inf')", loses=(0.25, 0.85)),
    Entry("attention_mask_inverted", "attention_context", '''
def attention_context(decoder_state, encoder_states, mask=None):
    scores = (encoder_states @ decoder_state.unsqueeze(-1)).squeeze(-1)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return (weights.unsqueeze(1) @ encoder_states).squeeze(1), weights
''', "reads the mask as True = hidden (nn.MultiheadAttention's key_padding_mask convention)",
          hint="the mask is True where attention is allowed: fill the scores where it is False (~mask)", loses=MOST),
    Entry("attention_scaled", "attention_context", '''
def attention_context(decoder_state, encoder_states, mask=None):
    scores = (encoder_states @ decoder_state.unsqueeze(-1)).squeeze(-1) / math.sqrt(decoder_state.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return (weights.unsqueeze(1) @ encoder_states).squeeze(1), weights
''', "divides the scores by sqrt(H) (Lab 05's scaled attention, one lab early)",
          hint="this score is the plain dot product, without the 1/sqrt(H) scale (that comes in Lab 05)", loses=MOST),
    Entry("attention_squeeze_all", "attention_context", '''
def attention_context(decoder_state, encoder_states, mask=None):
    scores = (encoder_states @ decoder_state.unsqueeze(-1)).squeeze()
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return (weights.unsqueeze(-2) @ encoder_states).squeeze(), weights
''', "squeeze() everywhere: a batch of one loses its batch dimension",
          hint="for a batch of one your context or weights lose the batch dimension: squeeze only the size-1 "
               "dimension you created (squeeze(-1), squeeze(1))", loses=SLIP),
    Entry("attention_naive_softmax", "attention_context", '''
def attention_context(decoder_state, encoder_states, mask=None):
    scores = (encoder_states @ decoder_state.unsqueeze(-1)).squeeze(-1)
    e = torch.exp(scores)
    if mask is not None:
        e = e * mask
    weights = e / e.sum(-1, keepdim=True)
    return (weights.unsqueeze(1) @ encoder_states).squeeze(1), weights
''', "hand-written softmax without subtracting the max: overflows (inf/inf = nan) for large scores",
          hint="large scores give inf or nan: use torch.softmax, which subtracts the maximum first", loses=SLIP),
    Entry("attention_context_from_scores", "attention_context", '''
def attention_context(decoder_state, encoder_states, mask=None):
    scores = (encoder_states @ decoder_state.unsqueeze(-1)).squeeze(-1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return (scores.nan_to_num(neginf=0.0).unsqueeze(1) @ encoder_states).squeeze(1), weights
''', "the context sums the encoder states weighted by the raw scores instead of the softmax weights",
          hint="the context is the sum of the encoder states weighted by the softmax weights, not by the scores",
          loses=MOST),
]

# ----------------------------------------------------------------------------------------------- variants
VARIANTS = [
    Entry("rnn_cell_f_linear", "rnn_cell", '''
import torch.nn.functional as F


def rnn_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    return torch.tanh(F.linear(x_t, W_ih, b_ih) + F.linear(h_prev, W_hh, b_hh))
''', "F.linear for both products"),
    Entry("rnn_cell_concatenated", "rnn_cell", '''
def rnn_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    W = torch.cat([W_ih, W_hh], dim=1)  # (H, D + H)
    return (torch.cat([x_t, h_prev], dim=-1) @ W.T + (b_ih + b_hh)).tanh()
''', "one product of the concatenated input and state with the concatenated weights"),

    Entry("elman_precomputed_inputs_preallocated", "ElmanRNN", '''
class ElmanRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.weight_ih_l0 = nn.Parameter(torch.empty(hidden_size, input_size))
        self.weight_hh_l0 = nn.Parameter(torch.empty(hidden_size, hidden_size))
        self.bias_ih_l0 = nn.Parameter(torch.empty(hidden_size))
        self.bias_hh_l0 = nn.Parameter(torch.empty(hidden_size))
        for p in self.parameters():
            nn.init.uniform_(p, -hidden_size ** -0.5, hidden_size ** -0.5)

    def forward(self, x, h0=None):
        B, T, _ = x.shape
        inputs = torch.einsum("btd,hd->bth", x, self.weight_ih_l0) + self.bias_ih_l0  # all steps at once
        h = torch.zeros(B, self.hidden_size, dtype=x.dtype, device=x.device) if h0 is None else h0
        outputs = x.new_empty(B, T, self.hidden_size)
        for t in range(T):
            h = torch.tanh(inputs[:, t] + h @ self.weight_hh_l0.T + self.bias_hh_l0)
            outputs[:, t] = h
        return outputs, outputs[:, -1]
''', "input projections for all steps at once (einsum), preallocated outputs written in place, nn.init"),
    Entry("elman_unbind_time_first", "ElmanRNN", '''
class ElmanRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        bound = 1 / math.sqrt(hidden_size)
        self.weight_ih_l0 = nn.Parameter(torch.rand(hidden_size, input_size) * 2 * bound - bound)
        self.weight_hh_l0 = nn.Parameter(torch.rand(hidden_size, hidden_size) * 2 * bound - bound)
        self.bias_ih_l0 = nn.Parameter(torch.rand(hidden_size) * 2 * bound - bound)
        self.bias_hh_l0 = nn.Parameter(torch.rand(hidden_size) * 2 * bound - bound)

    def forward(self, x, h0=None):
        h = torch.zeros_like(x[:, 0, :1]).expand(-1, self.weight_hh_l0.shape[0]) if h0 is None else h0
        states = []
        for x_t in x.transpose(0, 1).unbind(0):  # time-first view, one (B, D) slice per step
            h = rnn_cell(x_t, h, self.weight_ih_l0, self.weight_hh_l0, self.bias_ih_l0, self.bias_hh_l0)
            states.append(h)
        outputs = torch.stack(states).transpose(0, 1)  # (T, B, H) -> (B, T, H)
        return outputs, h
''', "iterates over a time-first view with unbind, stacks time-first and transposes back"),

    Entry("lstm_cell_split_and_slices", "lstm_cell", '''
import torch.nn.functional as F


def lstm_cell(x_t, h_prev, c_prev, W_ih, W_hh, b_ih, b_hh):
    H = h_prev.shape[-1]
    z = F.linear(x_t, W_ih, b_ih) + F.linear(h_prev, W_hh, b_hh)
    i = torch.sigmoid(z[:, :H])
    f = torch.sigmoid(z[:, H:2 * H])
    g = torch.tanh(z[:, 2 * H:3 * H])
    o = torch.sigmoid(z[:, 3 * H:])
    c = f * c_prev + i * g
    return o * c.tanh(), c
''', "explicit slices of H columns, F.linear"),
    Entry("lstm_cell_per_gate_weights", "lstm_cell", '''
def lstm_cell(x_t, h_prev, c_prev, W_ih, W_hh, b_ih, b_hh):
    gates = []
    for w_i, w_h, bi, bh in zip(W_ih.split(h_prev.shape[-1]), W_hh.split(h_prev.shape[-1]),
                                b_ih.split(h_prev.shape[-1]), b_hh.split(h_prev.shape[-1])):
        gates.append(x_t @ w_i.T + h_prev @ w_h.T + bi + bh)
    i, f, g, o = gates
    c_t = torch.sigmoid(f) * c_prev + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c_t), c_t
''', "splits the weights per gate first, one product per gate"),
    Entry("lstm_cell_sigmoid_via_tanh", "lstm_cell", '''
def lstm_cell(x_t, h_prev, c_prev, W_ih, W_hh, b_ih, b_hh):
    z = torch.addmm(b_ih + b_hh, x_t, W_ih.t()) + h_prev.matmul(W_hh.t())
    a = z.view(z.shape[0], 4, -1)  # (B, 4, H): block k is gate k
    sig = 0.5 * (1 + torch.tanh(0.5 * a))  # sigmoid(x) = (1 + tanh(x / 2)) / 2
    i, f, o = sig[:, 0], sig[:, 1], sig[:, 3]
    g = torch.tanh(a[:, 2])
    c_t = torch.addcmul(f * c_prev, i, g)
    return o * torch.tanh(c_t), c_t
''', "addmm, a (B, 4, H) view, the sigmoid written with tanh, addcmul"),

    Entry("last_state_gather", "last_valid_state", '''
def last_valid_state(outputs, lengths):
    if (lengths < 1).any() or (lengths > outputs.shape[1]).any():
        raise ValueError(f"lengths must be in [1, {outputs.shape[1]}], got {lengths.tolist()}")
    index = (lengths - 1).to(outputs.device).view(-1, 1, 1).expand(-1, 1, outputs.shape[-1])  # (B, 1, H)
    return outputs.gather(1, index).squeeze(1)
''', "torch.gather with an expanded index"),
    Entry("last_state_loop", "last_valid_state", '''
def last_valid_state(outputs, lengths):
    rows = []
    for b, n in enumerate(lengths.tolist()):
        if not 1 <= n <= outputs.shape[1]:
            raise ValueError(f"length {n} of row {b} is outside [1, {outputs.shape[1]}]")
        rows.append(outputs[b, n - 1])
    return torch.stack(rows)
''', "a Python loop over the rows"),
    Entry("last_state_one_hot", "last_valid_state", '''
import torch.nn.functional as F


def last_valid_state(outputs, lengths):
    one_hot = F.one_hot(lengths - 1, outputs.shape[1]).to(outputs.dtype)  # (B, T)
    return torch.einsum("bt,bth->bh", one_hot, outputs)
''', "a one-hot selection matrix and einsum (exact: the other terms are multiplied by 0)"),

    Entry("classifier_packed_sequence", "RNNClassifier", '''
class RNNClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_size, num_classes=1):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.lstm = nn.LSTM(embed_dim, hidden_size, batch_first=True)
        self.classifier = nn.Linear(hidden_size, num_classes)

    def forward(self, ids, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(self.embedding(ids), lengths.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        _, (h_n, _) = self.lstm(packed)
        logits = self.classifier(h_n[-1])
        return logits[:, 0] if logits.shape[-1] == 1 else logits
''', "pack_padded_sequence and h_n (never reads the padding), padding_idx=0, logits[:, 0]"),
    Entry("classifier_gather_inline", "RNNClassifier", '''
class RNNClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_size, num_classes=1):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_size, num_layers=1, batch_first=True)
        self.classifier = nn.Linear(hidden_size, num_classes)

    def forward(self, ids, lengths):
        outputs, _ = self.lstm(self.embedding(ids))
        last = outputs[torch.arange(ids.shape[0], device=ids.device), lengths - 1]
        out = self.classifier(last)
        return out.view(-1) if self.num_classes == 1 else out
''', "indexes the last real state inline instead of calling last_valid_state; view(-1)"),

    Entry("attention_einsum", "attention_context", '''
import torch.nn.functional as F


def attention_context(decoder_state, encoder_states, mask=None):
    scores = torch.einsum("bh,bth->bt", decoder_state, encoder_states)
    if mask is not None:
        scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    weights = F.softmax(scores, dim=1)
    return torch.einsum("bt,bth->bh", weights, encoder_states), weights
''', "einsum for both sums, torch.where for the mask"),
    Entry("attention_broadcast_sum_big_negative", "attention_context", '''
def attention_context(decoder_state, encoder_states, mask=None):
    scores = (encoder_states * decoder_state[:, None, :]).sum(-1)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e30)
    scores = scores - scores.max(dim=-1, keepdim=True).values
    e = scores.exp()
    weights = e / e.sum(dim=-1, keepdim=True)
    return (weights[..., None] * encoder_states).sum(1), weights
''', "broadcast products and sums, a manual stable softmax, -1e30 instead of -inf (exp underflows to 0 exactly)"),
    Entry("attention_bmm", "attention_context", '''
def attention_context(decoder_state, encoder_states, mask=None):
    scores = torch.bmm(encoder_states, decoder_state.unsqueeze(2))[:, :, 0]
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    weights = scores.softmax(-1)
    return torch.bmm(weights.unsqueeze(1), encoder_states)[:, 0], weights
''', "torch.bmm (the inputs are exactly 3-D here) and indexing instead of squeeze"),
]

# ------------------------------------------------------------------ gru_cell and BiGRUEncoder (issue 21)
# Kept in one block (MUTANTS += / VARIANTS +=) so that other additions merge cleanly. The BiGRUEncoder entries
# subclass the reference class (its parameters and initialisation) and replace forward only.
_BIGRU_BACKWARD = '''
        bwd, h_b = self.direction(x, reversed(range(T)), *backward_weights)'''
_BIGRU_RETURN = '''
        return torch.cat([fwd, bwd.flip(1)], dim=-1), torch.stack([h_f, h_b])'''


def _bigru(backward: str = _BIGRU_BACKWARD, returns: str = _BIGRU_RETURN) -> str:
    """A BiGRUEncoder whose forward runs each direction with ``direction`` (its states stacked in the order
    computed, (B, T, H), and its last state (B, H)) and differs from a correct one only in the lines given:
    ``backward``, the backward run (``bwd``, ``h_b``), and ``returns``."""
    return f'''
class BiGRUEncoder(BiGRUEncoder):
    def direction(self, x, steps, w_ih, w_hh, b_ih, b_hh):
        h, states = x.new_zeros(x.shape[0], self.hidden_size), []
        for t in steps:
            h = gru_cell(x[:, t], h, w_ih, w_hh, b_ih, b_hh)
            states.append(h)
        return torch.stack(states, 1), h

    def forward(self, x):
        T = x.shape[1]
        forward_weights = (self.weight_ih_l0, self.weight_hh_l0, self.bias_ih_l0, self.bias_hh_l0)
        backward_weights = (self.weight_ih_l0_reverse, self.weight_hh_l0_reverse, self.bias_ih_l0_reverse,
                            self.bias_hh_l0_reverse)
        fwd, h_f = self.direction(x, range(T), *forward_weights){backward}{returns}
'''


MUTANTS += [
    Entry("gru_reset_outside_hidden_bias", "gru_cell", '''
def gru_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    H = h_prev.shape[-1]
    i_r, i_z, i_n = (x_t @ W_ih.T + b_ih).chunk(3, dim=-1)
    h_r, h_z, _ = (h_prev @ W_hh.T + b_hh).chunk(3, dim=-1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * (h_prev @ W_hh[2 * H:].T) + b_hh[2 * H:])
    return (1 - z) * n + z * h_prev
''', "the reset gate multiplies W_hn h but not b_hn",
          hint="r multiplies the whole hidden part of the candidate, W_hn h_prev + b_hn, bias included", loses=MOST),
    Entry("gru_reset_before_product", "gru_cell", '''
def gru_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    H = h_prev.shape[-1]
    i_r, i_z, i_n = (x_t @ W_ih.T + b_ih).chunk(3, dim=-1)
    h_r, h_z, _ = (h_prev @ W_hh.T + b_hh).chunk(3, dim=-1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + (r * h_prev) @ W_hh[2 * H:].T + b_hh[2 * H:])
    return (1 - z) * n + z * h_prev
''', "the original paper's candidate, W (r * h): applies r to h_prev before the product, not after it",
          hint="PyTorch's GRU applies r after the product: n = tanh(W_in x + b_in + r * (W_hn h_prev + b_hn))", loses=MOST),
    Entry("gru_sum_before_chunk", "gru_cell", '''
def gru_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    a_r, a_z, a_n = (x_t @ W_ih.T + b_ih + h_prev @ W_hh.T + b_hh).chunk(3, dim=-1)
    r, z = torch.sigmoid(a_r), torch.sigmoid(a_z)
    n = torch.tanh(r * a_n)
    return (1 - z) * n + z * h_prev
''', "adds the input and hidden parts first, as in the LSTM, then applies r to the whole sum",
          hint="keep the input part and the hidden part of the candidate apart: r multiplies the hidden part only",
          loses=MOST),
    Entry("gru_z_swapped", "gru_cell", '''
def gru_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    i_r, i_z, i_n = (x_t @ W_ih.T + b_ih).chunk(3, dim=-1)
    h_r, h_z, h_n = (h_prev @ W_hh.T + b_hh).chunk(3, dim=-1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return z * n + (1 - z) * h_prev
''', "z and 1 - z swapped: z weighs the candidate instead of the old state",
          hint="z weighs the old state: h_t = (1 - z) * n + z * h_prev", loses=MOST),
    Entry("gru_gates_zrn", "gru_cell", '''
def gru_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    i_z, i_r, i_n = (x_t @ W_ih.T + b_ih).chunk(3, dim=-1)
    h_z, h_r, h_n = (h_prev @ W_hh.T + b_hh).chunk(3, dim=-1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return (1 - z) * n + z * h_prev
''', "gates in the order z, r, n (the order of many write-ups) instead of PyTorch's r, z, n",
          hint="PyTorch stacks the GRU's blocks as r, z, n: the reset gate is the first block of rows", loses=MOST),
    Entry("gru_uses_torch_gru_cell", "gru_cell", '''
def gru_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    return torch.gru_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh)
''', "calls torch.gru_cell, which the lab forbids",
          hint="torch.gru_cell is not allowed here: compute the three gates with matrix products", loses=ALL),

    Entry("bigru_backward_not_rereversed", "BiGRUEncoder", _bigru(returns='''
        return torch.cat([fwd, bwd], dim=-1), torch.stack([h_f, h_b])  # bwd: last position first'''),
          "the backward states are stacked in the order they were computed, not re-reversed",
          hint="the backward states come out last position first: reverse them back so that position t holds "
               "the state after reading x_T .. x_t", loses=MOST),
    Entry("bigru_shared_weights", "BiGRUEncoder", _bigru(backward='''
        bwd, h_b = self.direction(x, reversed(range(T)), *forward_weights)'''),
          "the backward direction reuses the forward weights",
          hint="the backward direction has its own weights, the parameters ending in _reverse", loses=MOST),
    Entry("bigru_h_n_backward_from_last_position", "BiGRUEncoder", _bigru(returns='''
        outputs = torch.cat([fwd, bwd.flip(1)], dim=-1)
        return outputs, outputs[:, -1].reshape(x.shape[0], 2, self.hidden_size).transpose(0, 1)'''),
          "h_n taken from the last position for both directions: the backward half there has read x_T only",
          hint=("the backward direction reads the sequence from the end, so its last state is the one after reading the "
               "first token, not the one at the last position"), loses=MOST),
    Entry("bigru_flips_the_batch", "BiGRUEncoder", _bigru(
        backward='''
        bwd, h_b = self.direction(x.flip(0), range(T), *backward_weights)  # the batch axis, not the time axis''',
        returns='''
        return torch.cat([fwd, bwd.flip(0)], dim=-1), torch.stack([h_f, h_b.flip(0)])'''),
          "reverses x along dim 0 (the batch) instead of dim 1 (time)",
          hint="x is batch-first (B, T, D): reverse the time steps, x.flip(1), not the rows", loses=MOST),
    Entry("bigru_directions_concatenated_backward_first", "BiGRUEncoder", _bigru(returns='''
        return torch.cat([bwd.flip(1), fwd], dim=-1), torch.stack([h_b, h_f])'''),
          "the backward direction first in the concatenation and in h_n",
          hint=("the two directions look swapped: as in nn.GRU(bidirectional=True), the left-to-right states come first, "
               "in the outputs' features and in h_n"), loses=MOST),
]

VARIANTS += [
    Entry("gru_cell_interpolation_and_slices", "gru_cell", '''
import torch.nn.functional as F


def gru_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    H = h_prev.shape[-1]
    gate = lambda k: F.linear(x_t, W_ih[k * H:(k + 1) * H], b_ih[k * H:(k + 1) * H])
    hidden = lambda k: F.linear(h_prev, W_hh[k * H:(k + 1) * H], b_hh[k * H:(k + 1) * H])
    r = torch.sigmoid(gate(0) + hidden(0))
    z = torch.sigmoid(gate(1) + hidden(1))
    n = torch.tanh(gate(2) + r * hidden(2))
    return n + z * (h_prev - n)
''', "F.linear on each block's rows, and the update written as n + z (h_prev - n)"),
    Entry("gru_cell_joint_rz", "gru_cell", '''
def gru_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    H = h_prev.shape[-1]
    gi = torch.addmm(b_ih, x_t, W_ih.t())
    gh = torch.addmm(b_hh, h_prev, W_hh.t())
    rz = torch.sigmoid(gi[:, :2 * H] + gh[:, :2 * H])
    r, z = rz[:, :H], rz[:, H:]
    n = torch.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
    return torch.lerp(n, h_prev, z)
''', "torch.addmm, one sigmoid for r and z together, torch.lerp for the update"),
    Entry("bigru_flip_time", "BiGRUEncoder", '''
class BiGRUEncoder(BiGRUEncoder):
    def run(self, x, w_ih, w_hh, b_ih, b_hh):
        h, states = x.new_zeros(x.shape[0], self.hidden_size), []
        for x_t in x.unbind(1):
            h = gru_cell(x_t, h, w_ih, w_hh, b_ih, b_hh)
            states.append(h)
        return torch.stack(states, 1), h

    def forward(self, x):
        fwd, h_f = self.run(x, self.weight_ih_l0, self.weight_hh_l0, self.bias_ih_l0, self.bias_hh_l0)
        bwd, h_b = self.run(x.flip(1), self.weight_ih_l0_reverse, self.weight_hh_l0_reverse,
                            self.bias_ih_l0_reverse, self.bias_hh_l0_reverse)
        return torch.cat([fwd, bwd.flip(1)], dim=-1), torch.stack([h_f, h_b])
''', "one helper for a direction; the backward one reads x.flip(1) and its states are flipped back"),
    Entry("bigru_preallocated", "BiGRUEncoder", '''
class BiGRUEncoder(BiGRUEncoder):
    def forward(self, x):
        B, T, _ = x.shape
        H = self.hidden_size
        outputs = x.new_zeros(B, T, 2 * H)
        h_f = h_b = x.new_zeros(B, H)
        for t in range(T):
            h_f = gru_cell(x[:, t], h_f, self.weight_ih_l0, self.weight_hh_l0, self.bias_ih_l0, self.bias_hh_l0)
            h_b = gru_cell(x[:, T - 1 - t], h_b, self.weight_ih_l0_reverse, self.weight_hh_l0_reverse,
                           self.bias_ih_l0_reverse, self.bias_hh_l0_reverse)
            outputs[:, t, :H] = h_f  # slice assignment: autograd records the copies
            outputs[:, T - 1 - t, H:] = h_b
        return outputs, torch.stack([h_f, h_b])
''', "both directions in one loop, written into a preallocated tensor"),
]
