/* Native SimHash over distinct words: the same fingerprints as crawler_lib.fingerprint's Python code
 * (tests/test_fingerprint.py checks both on every kind of text), several times faster on word-rich pages.
 *
 * ascii_simhash(bytes): the whole fingerprint of ASCII text. Words are maximal runs of [A-Za-z0-9_],
 * lowercased; runs of digits only are left out; each distinct word votes once.
 * words_simhash(iterable of bytes): the vote over words the caller split (non-ASCII text), each
 * counted once however often it appears.
 * A word's vote: CRC-32 of its bytes (zlib's), spread to 64 bits by splitmix64; bit i of the result is
 * set when more than half of the distinct words have it set.
 * ascii_fingerprint(bytes) and words_fingerprint(iterable of bytes): (SimHash, MinHash band keys), the
 * keys as a list of MINHASH_BANDS signed 64-bit ints (empty without words): a distinct word's hash, mixed
 * with MINHASH_SALT by splitmix64, falls in slot (mixed % MINHASH_SLOTS) and a slot keeps the least
 * (mixed / MINHASH_SLOTS); an empty slot borrows the next filled slot's value mixed with its distance, and
 * band b hashes its MINHASH_ROWS slots in a splitmix64 chain from b (fingerprint._bands, the same in Python).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MINHASH_BANDS 20
#define MINHASH_ROWS 6
#define MINHASH_SLOTS (MINHASH_BANDS * MINHASH_ROWS)
#define MINHASH_SALT 0x6A09E667F3BCC909ull

static uint32_t crc_table[256];
static unsigned char word_fold[256]; /* a word byte lowercased, 0 for a byte that ends a word */

static void init_tables(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
        int word = (n >= 'a' && n <= 'z') || (n >= 'A' && n <= 'Z') || (n >= '0' && n <= '9') || n == '_';
        word_fold[n] = word ? (unsigned char)(n >= 'A' && n <= 'Z' ? n + 32 : n) : 0;
    }
}

static uint64_t splitmix64(uint64_t value) {
    value += 0x9E3779B97F4A7C15ull;
    value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9ull;
    value = (value ^ (value >> 27)) * 0x94D049BB133111EBull;
    return value ^ (value >> 31);
}

typedef struct {
    const unsigned char *start;
    uint32_t length;
    uint32_t crc;
} Word;

typedef struct {
    uint32_t word; /* 1 + index into the words, 0 for a free slot */
    uint32_t crc;
} Slot;

/* Buffers reused from call to call (the GIL is held throughout): a page costs no allocation once
 * the buffers have grown to the longest page seen. */
static Word *words = NULL;
static size_t words_capacity = 0;
static Slot *slots = NULL;
static size_t slots_capacity = 0;

static int reserve_words(size_t count) {
    if (count <= words_capacity) return 0;
    Word *grown = realloc(words, count * sizeof(Word));
    if (grown == NULL) return -1;
    words = grown;
    words_capacity = count;
    return 0;
}

/* The vote of the distinct words among words[0..count): distinct by content, found through a table
 * of twice as many slots as words (small enough to stay in cache, unlike one sized by the text).
 * With `minima` (MINHASH_SLOTS values), also each MinHash slot's least value. */
static PyObject *vote(size_t count, uint64_t *minima) {
    size_t size = 64;
    while (size < count * 2) size <<= 1;
    if (size > slots_capacity) {
        Slot *grown = realloc(slots, size * sizeof(Slot));
        if (grown == NULL) return PyErr_NoMemory();
        slots = grown;
        slots_capacity = size;
    }
    memset(slots, 0, size * sizeof(Slot));
    size_t mask = size - 1, distinct = 0;
    uint32_t byte_counts[8][256] = {{0}}; /* [j][v]: distinct words whose hash has byte j equal to v */
    for (size_t n = 0; n < count; n++) {
        const Word *word = &words[n];
        uint64_t hash = splitmix64(word->crc);
        size_t i = (size_t)hash & mask;
        int seen = 0;
        while (slots[i].word) {
            const Word *other = &words[slots[i].word - 1];
            if (slots[i].crc == word->crc && other->length == word->length
                && memcmp(other->start, word->start, word->length) == 0) {
                seen = 1;
                break;
            }
            i = (i + 1) & mask;
        }
        if (seen) continue;
        slots[i] = (Slot){(uint32_t)n + 1, word->crc};
        distinct++;
        for (int j = 0; j < 8; j++) byte_counts[j][(hash >> (8 * j)) & 0xFF]++;
        if (minima != NULL) {
            uint64_t mixed = splitmix64(hash ^ MINHASH_SALT);
            uint64_t value = mixed / MINHASH_SLOTS;
            size_t slot = (size_t)(mixed % MINHASH_SLOTS);
            if (value < minima[slot]) minima[slot] = value;
        }
    }
    uint64_t result = 0;
    for (int bit = 0; bit < 64; bit++) {
        uint64_t votes = 0;
        for (int value = 0; value < 256; value++)
            if ((value >> (bit % 8)) & 1) votes += byte_counts[bit / 8][value];
        if (votes * 2 > distinct) result |= 1ull << bit;
    }
    return PyLong_FromUnsignedLongLong(result);
}

static PyObject *ascii_vote(PyObject *arg, uint64_t *minima) {
    Py_buffer text;
    if (PyObject_GetBuffer(arg, &text, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *bytes = text.buf;
    Py_ssize_t length = text.len;
    if (length >= UINT32_MAX) {
        PyBuffer_Release(&text);
        PyErr_SetString(PyExc_ValueError, "text too long");
        return NULL;
    }
    /* Words are lowercased in a copy, so that equal words compare equal byte for byte. */
    unsigned char *folded = malloc(length > 0 ? (size_t)length : 1);
    if (folded == NULL || reserve_words((size_t)length / 2 + 1) < 0) {
        free(folded);
        PyBuffer_Release(&text);
        return PyErr_NoMemory();
    }
    size_t count = 0;
    Py_ssize_t i = 0;
    while (i < length) {
        if (!word_fold[bytes[i]]) {
            i++;
            continue;
        }
        Py_ssize_t start = i;
        int digits_only = 1;
        uint32_t crc = 0xFFFFFFFFu;
        unsigned char c;
        for (; i < length && (c = word_fold[bytes[i]]) != 0; i++) {
            digits_only &= c >= '0' && c <= '9';
            folded[i] = c;
            crc = crc_table[(crc ^ c) & 0xFF] ^ (crc >> 8);
        }
        if (!digits_only) words[count++] = (Word){folded + start, (uint32_t)(i - start), crc ^ 0xFFFFFFFFu};
    }
    PyObject *result = vote(count, minima);
    free(folded);
    PyBuffer_Release(&text);
    return result;
}

static PyObject *words_vote(PyObject *arg, uint64_t *minima) {
    PyObject *sequence = PySequence_Fast(arg, "words_simhash() takes a collection of bytes");
    if (sequence == NULL) return NULL;
    size_t count = (size_t)PySequence_Fast_GET_SIZE(sequence);
    if (reserve_words(count) < 0) {
        Py_DECREF(sequence);
        return PyErr_NoMemory();
    }
    PyObject **items = PySequence_Fast_ITEMS(sequence);
    for (size_t n = 0; n < count; n++) {
        if (!PyBytes_Check(items[n]) || PyBytes_GET_SIZE(items[n]) >= UINT32_MAX) {
            Py_DECREF(sequence);
            PyErr_SetString(PyExc_TypeError, "words_simhash() takes a collection of bytes");
            return NULL;
        }
        const unsigned char *word = (const unsigned char *)PyBytes_AS_STRING(items[n]);
        Py_ssize_t length = PyBytes_GET_SIZE(items[n]);
        uint32_t crc = 0xFFFFFFFFu;
        for (Py_ssize_t i = 0; i < length; i++) crc = crc_table[(crc ^ word[i]) & 0xFF] ^ (crc >> 8);
        words[n] = (Word){word, (uint32_t)length, crc ^ 0xFFFFFFFFu};
    }
    /* The words stay alive (held by `sequence`) while `words` points into them. */
    PyObject *result = vote(count, minima);
    Py_DECREF(sequence);
    return result;
}

static uint64_t mix_slot(uint64_t value, uint64_t distance) { return splitmix64(value ^ (distance << 56)); }

/* The band keys of the MinHash slots, as a list of signed ints: fingerprint._bands in C. */
static PyObject *band_keys(const uint64_t *minima) {
    int first = 0;
    while (first < MINHASH_SLOTS && minima[first] == UINT64_MAX) first++;
    if (first == MINHASH_SLOTS) return PyList_New(0);
    uint64_t filled[MINHASH_SLOTS];
    int next = first; /* the next filled slot at or after n, circularly */
    for (int n = MINHASH_SLOTS - 1; n >= 0; n--) {
        if (minima[n] != UINT64_MAX) next = n;
        uint64_t distance = (uint64_t)((next - n + MINHASH_SLOTS) % MINHASH_SLOTS);
        filled[n] = distance == 0 ? minima[n] : mix_slot(minima[next], distance);
    }
    PyObject *keys = PyList_New(MINHASH_BANDS);
    if (keys == NULL) return NULL;
    for (int band = 0; band < MINHASH_BANDS; band++) {
        uint64_t key = (uint64_t)band;
        for (int row = 0; row < MINHASH_ROWS; row++) key = splitmix64(key ^ filled[band * MINHASH_ROWS + row]);
        PyObject *value = PyLong_FromLongLong((long long)key);
        if (value == NULL) {
            Py_DECREF(keys);
            return NULL;
        }
        PyList_SET_ITEM(keys, band, value);
    }
    return keys;
}

static PyObject *with_minima(PyObject *(*vote_of)(PyObject *, uint64_t *), PyObject *arg) {
    uint64_t minima[MINHASH_SLOTS];
    for (int n = 0; n < MINHASH_SLOTS; n++) minima[n] = UINT64_MAX;
    PyObject *simhash = vote_of(arg, minima);
    if (simhash == NULL) return NULL;
    PyObject *keys = band_keys(minima);
    if (keys == NULL) {
        Py_DECREF(simhash);
        return NULL;
    }
    return Py_BuildValue("(NN)", simhash, keys);
}

static PyObject *ascii_simhash(PyObject *self, PyObject *arg) { return ascii_vote(arg, NULL); }
static PyObject *words_simhash(PyObject *self, PyObject *arg) { return words_vote(arg, NULL); }
static PyObject *ascii_fingerprint(PyObject *self, PyObject *arg) { return with_minima(ascii_vote, arg); }
static PyObject *words_fingerprint(PyObject *self, PyObject *arg) { return with_minima(words_vote, arg); }

static PyMethodDef methods[] = {
    {"ascii_simhash", ascii_simhash, METH_O, "SimHash of ASCII text over its distinct words, numbers left out."},
    {"words_simhash", words_simhash, METH_O, "SimHash over a collection of words (bytes), each counted once."},
    {"ascii_fingerprint", ascii_fingerprint, METH_O, "(SimHash, MinHash band keys) of ASCII text."},
    {"words_fingerprint", words_fingerprint, METH_O, "(SimHash, MinHash band keys) over a collection of words."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_simhash", NULL, -1, methods};

PyMODINIT_FUNC PyInit__simhash(void) {
    init_tables();
    PyObject *created = PyModule_Create(&module);
    if (created != NULL && (PyModule_AddIntConstant(created, "MINHASH_BANDS", MINHASH_BANDS) < 0
                            || PyModule_AddIntConstant(created, "MINHASH_ROWS", MINHASH_ROWS) < 0)) {
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
