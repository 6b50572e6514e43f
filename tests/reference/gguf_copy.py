"""Rewriting a GGUF file with the `gguf` package: the reader of the source
and a writer for the copy that already holds every metadata key of the
source (the header's own GGUF.* counts left to the writer). The caller adds
keys and tensors, then calls finish()."""
import gguf


def open_copy(src, dst):
    """(reader of src, writer of dst with src's metadata)."""
    r = gguf.GGUFReader(str(src))
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(str(dst), arch)
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue  # the header's counts; the writer adds the architecture
        sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(key, field.contents(), field.types[0], sub_type=sub)
    return r, w


def finish(w):
    """Writes header, metadata and tensors, and closes the file."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
