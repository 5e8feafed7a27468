#include "data/h5io.h"

#include <stdio.h>
#include <string.h>

enum {
    CHUNK_BYTES = 1 << 20,      /* target size of one chunk */
    CHUNK_MAX_ROWS = 1 << 16,   /* keeps [N] chunks small enough for the chunk cache */
    DEFLATE_LEVEL = 1,          /* fast; the byte shuffle filter does most of the work */
    MAX_STRING_ATTR = 256
};

void lb_h5_quiet_begin(lb_h5_quiet *saved)
{
    saved->func = NULL;
    saved->data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &saved->func, &saved->data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void lb_h5_quiet_end(const lb_h5_quiet *saved) { H5Eset_auto2(H5E_DEFAULT, saved->func, saved->data); }

void lb_h5_close(hid_t id)
{
    if (id < 0)
        return;
    switch (H5Iget_type(id)) {
    case H5I_FILE: H5Fclose(id); break;
    case H5I_GROUP: H5Gclose(id); break;
    case H5I_DATASET: H5Dclose(id); break;
    case H5I_ATTR: H5Aclose(id); break;
    case H5I_DATATYPE: H5Tclose(id); break;
    case H5I_DATASPACE: H5Sclose(id); break;
    case H5I_GENPROP_LST: H5Pclose(id); break;
    default: break;
    }
}

/* ---- writing ---- */

/* One scalar attribute of file type `ftype` written from memory type `mtype`. */
static lb_status write_attr(hid_t loc, const char *name, hid_t ftype, hid_t mtype, const void *value, const char *file)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attr = space < 0 ? -1 : H5Acreate2(loc, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = attr < 0 ? -1 : H5Awrite(attr, mtype, value);
    lb_h5_close(attr);
    lb_h5_close(space);
    if (rc < 0)
        return lb_error(LB_ERR_IO, "%s: cannot write attribute '%s'", file, name);
    return LB_OK;
}

lb_status lb_h5_write_attr_int(hid_t loc, const char *name, int64_t value, const char *file)
{
    return write_attr(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value, file);
}

lb_status lb_h5_write_attr_uint(hid_t loc, const char *name, uint64_t value, const char *file)
{
    return write_attr(loc, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &value, file);
}

lb_status lb_h5_write_attr_real(hid_t loc, const char *name, double value, const char *file)
{
    return write_attr(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value, file);
}

/* Variable-length UTF-8, so h5py reads a str (not bytes). */
lb_status lb_h5_write_attr_string(hid_t loc, const char *name, const char *value, const char *file)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    if (type < 0 || H5Tset_size(type, H5T_VARIABLE) < 0 || H5Tset_cset(type, H5T_CSET_UTF8) < 0) {
        lb_h5_close(type);
        return lb_error(LB_ERR_IO, "%s: cannot make the string type of attribute '%s'", file, name);
    }
    lb_status st = write_attr(loc, name, type, type, &value, file);
    lb_h5_close(type);
    return st;
}

/* Examples per chunk: about CHUNK_BYTES, at most CHUNK_MAX_ROWS, and no more than
 * the split holds (small splits stay small on disk and fast to read). */
static int64_t chunk_rows(const lb_layout *layout, lb_field field, int64_t n)
{
    int64_t row_bytes = lb_layout_row_elems(layout, field) * 4;
    int64_t rows = CHUNK_BYTES / (row_bytes > 0 ? row_bytes : 1);
    rows = rows > CHUNK_MAX_ROWS ? CHUNK_MAX_ROWS : rows;
    rows = rows > n ? n : rows;
    return rows < 1 ? 1 : rows;
}

/* Dataset creation properties: chunks of whole examples, byte shuffle, deflate, a
 * Fletcher-32 checksum per chunk (corruption is detected on reading), and no
 * timestamps (same options => same bytes). */
static hid_t field_create_plist(const lb_layout *layout, lb_field field, int64_t n)
{
    hsize_t chunk[3];
    int64_t dims[3];
    int rank = lb_layout_dims(layout, field, chunk_rows(layout, field, n), dims);
    for (int i = 0; i < rank; i++)
        chunk[i] = (hsize_t)dims[i];
    hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
    if (plist < 0 || H5Pset_chunk(plist, rank, chunk) < 0 || H5Pset_shuffle(plist) < 0 ||
        H5Pset_deflate(plist, DEFLATE_LEVEL) < 0 || H5Pset_fletcher32(plist) < 0 ||
        H5Pset_obj_track_times(plist, 0) < 0) {
        lb_h5_close(plist);
        return -1;
    }
    return plist;
}

lb_status lb_h5_create_field(hid_t group, const char *group_name, const lb_layout *layout, lb_field field, int64_t n,
                             hid_t *out, const char *file)
{
    int64_t dims[3];
    hsize_t cur[3], max[3];
    int rank = lb_layout_dims(layout, field, n, dims);
    for (int i = 0; i < rank; i++)
        cur[i] = max[i] = (hsize_t)dims[i];
    max[0] = H5S_UNLIMITED; /* lets an empty split (N = 0) be chunked too */
    hid_t space = H5Screate_simple(rank, cur, max);
    hid_t plist = field_create_plist(layout, field, n);
    hid_t ftype = lb_layout_is_float(layout, field) ? H5T_IEEE_F32LE : H5T_STD_I32LE;
    *out = (space < 0 || plist < 0)
               ? -1
               : H5Dcreate2(group, lb_field_name(field), ftype, space, H5P_DEFAULT, plist, H5P_DEFAULT);
    lb_h5_close(plist);
    lb_h5_close(space);
    if (*out < 0)
        return lb_error(LB_ERR_IO, "%s: cannot create dataset /%s/%s", file, group_name, lb_field_name(field));
    return LB_OK;
}

/* Writes count examples of one field at example offset start. */
static lb_status write_field(hid_t dset, const lb_layout *layout, lb_field field, const void *data, int64_t start,
                             int64_t count, const char *file)
{
    int64_t dims[3];
    hsize_t off[3] = {(hsize_t)start, 0, 0}, cnt[3];
    int rank = lb_layout_dims(layout, field, count, dims);
    for (int i = 0; i < rank; i++)
        cnt[i] = (hsize_t)dims[i];
    hid_t fspace = H5Dget_space(dset);
    hid_t mspace = H5Screate_simple(rank, cnt, NULL);
    hid_t mtype = lb_layout_is_float(layout, field) ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT32;
    herr_t rc = (fspace < 0 || mspace < 0) ? -1 : H5Sselect_hyperslab(fspace, H5S_SELECT_SET, off, NULL, cnt, NULL);
    if (rc >= 0)
        rc = H5Dwrite(dset, mtype, mspace, fspace, H5P_DEFAULT, data);
    lb_h5_close(mspace);
    lb_h5_close(fspace);
    if (rc < 0)
        return lb_error(LB_ERR_IO, "%s: cannot write %s of examples [%lld, %lld) (disk full?)", file,
                        lb_field_name(field), (long long)start, (long long)(start + count));
    return LB_OK;
}

lb_status lb_h5_write_rows(const hid_t *dsets, const lb_layout *layout, const lb_rows *rows, int64_t start,
                           const char *file)
{
    if (rows->n == 0)
        return LB_OK;
    for (int f = 0; f < LB_FIELD_COUNT; f++) {
        if (!lb_layout_has(layout, (lb_field)f))
            continue;
        lb_status st = write_field(dsets[f], layout, (lb_field)f, rows->data[f], start, rows->n, file);
        if (st != LB_OK)
            return st;
    }
    return LB_OK;
}

hid_t lb_h5_create_group(hid_t loc, const char *name)
{
    hid_t plist = H5Pcreate(H5P_GROUP_CREATE);
    hid_t group = (plist < 0 || H5Pset_obj_track_times(plist, 0) < 0)
                      ? -1
                      : H5Gcreate2(loc, name, H5P_DEFAULT, plist, H5P_DEFAULT);
    lb_h5_close(plist);
    return group;
}

/* ---- reading ---- */

int lb_h5_has_attr(hid_t loc, const char *name) { return H5Aexists(loc, name) > 0; }

int lb_h5_has_link(hid_t loc, const char *name) { return H5Lexists(loc, name, H5P_DEFAULT) > 0; }

static void type_name(H5T_class_t cls, size_t size, int is_signed, char *buf, size_t bufsize)
{
    switch (cls) {
    case H5T_INTEGER: snprintf(buf, bufsize, "%sint%zu", is_signed ? "" : "u", size * 8); break;
    case H5T_FLOAT: snprintf(buf, bufsize, "float%zu", size * 8); break;
    case H5T_STRING: snprintf(buf, bufsize, "string"); break;
    case H5T_COMPOUND: snprintf(buf, bufsize, "compound"); break;
    case H5T_ENUM: snprintf(buf, bufsize, "enum"); break;
    case H5T_ARRAY: snprintf(buf, bufsize, "array"); break;
    default: snprintf(buf, bufsize, "type class %d", (int)cls); break;
    }
}

/* Opens attribute `name` and checks it holds one element; *cls receives its class. */
static lb_status open_scalar_attr(hid_t loc, const char *name, hid_t *attr, hid_t *type, const char *file)
{
    *attr = *type = -1;
    if (!lb_h5_has_attr(loc, name))
        return lb_error(LB_ERR_FORMAT, "%s: missing root attribute '%s' (is it a lookback data file?)", file, name);
    *attr = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t space = *attr < 0 ? -1 : H5Aget_space(*attr);
    hssize_t npoints = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    lb_h5_close(space);
    *type = npoints == 1 ? H5Aget_type(*attr) : -1;
    if (*type < 0) {
        lb_h5_close(*attr);
        *attr = -1;
        return lb_error(LB_ERR_FORMAT, "%s: attribute '%s' is unreadable or not a single value (found %lld values)",
                        file, name, (long long)npoints);
    }
    return LB_OK;
}

/* Reads attribute `name`, whose class must be one of `ok_classes` (bit per class),
 * converted to memory type `mtype`. */
static lb_status read_attr(hid_t loc, const char *name, unsigned ok_classes, const char *expected, hid_t mtype,
                           void *out, const char *file)
{
    hid_t attr, type;
    lb_status st = open_scalar_attr(loc, name, &attr, &type, file);
    if (st != LB_OK)
        return st;
    H5T_class_t cls = H5Tget_class(type);
    char found[32];
    type_name(cls, H5Tget_size(type), H5Tget_sign(type) == H5T_SGN_2, found, sizeof found);
    if (cls < 0 || !(ok_classes & (1u << cls)))
        st = lb_error(LB_ERR_FORMAT, "%s: attribute '%s': expected %s, found %s", file, name, expected, found);
    else if (H5Aread(attr, mtype, out) < 0)
        st = lb_error(LB_ERR_FORMAT, "%s: attribute '%s' (%s) cannot be read as %s", file, name, found, expected);
    lb_h5_close(type);
    lb_h5_close(attr);
    return st;
}

lb_status lb_h5_read_attr_int(hid_t loc, const char *name, int64_t *out, const char *file)
{
    return read_attr(loc, name, 1u << H5T_INTEGER, "an integer", H5T_NATIVE_INT64, out, file);
}

lb_status lb_h5_read_attr_uint(hid_t loc, const char *name, uint64_t *out, const char *file)
{
    return read_attr(loc, name, 1u << H5T_INTEGER, "an integer", H5T_NATIVE_UINT64, out, file);
}

lb_status lb_h5_read_attr_real(hid_t loc, const char *name, double *out, const char *file)
{
    return read_attr(loc, name, (1u << H5T_INTEGER) | (1u << H5T_FLOAT), "a number", H5T_NATIVE_DOUBLE, out, file);
}

static lb_status read_string(hid_t attr, hid_t type, char *buf, size_t size)
{
    hid_t mtype = H5Tcopy(H5T_C_S1);
    H5T_cset_t cset = H5Tget_cset(type);
    herr_t rc = (mtype < 0 || cset < 0) ? -1 : H5Tset_cset(mtype, cset);
    if (H5Tis_variable_str(type) > 0) {
        char *value = NULL;
        if (rc >= 0)
            rc = H5Tset_size(mtype, H5T_VARIABLE);
        if (rc >= 0)
            rc = H5Aread(attr, mtype, &value);
        if (rc >= 0)
            snprintf(buf, size, "%s", value ? value : "");
        if (value)
            H5free_memory(value);
    } else {
        size_t len = H5Tget_size(type);
        char tmp[MAX_STRING_ATTR + 1];
        if (len == 0 || len > MAX_STRING_ATTR)
            rc = -1;
        if (rc >= 0)
            rc = H5Tset_size(mtype, len + 1);
        if (rc >= 0)
            rc = H5Tset_strpad(mtype, H5T_STR_NULLTERM);
        if (rc >= 0)
            rc = H5Aread(attr, mtype, tmp);
        if (rc >= 0) {
            tmp[len] = '\0';
            snprintf(buf, size, "%s", tmp);
        }
    }
    lb_h5_close(mtype);
    return rc < 0 ? LB_ERR_FORMAT : LB_OK;
}

lb_status lb_h5_read_attr_string(hid_t loc, const char *name, char *buf, size_t size, const char *file)
{
    hid_t attr, type;
    lb_status st = open_scalar_attr(loc, name, &attr, &type, file);
    if (st != LB_OK)
        return st;
    char found[32];
    type_name(H5Tget_class(type), H5Tget_size(type), H5Tget_sign(type) == H5T_SGN_2, found, sizeof found);
    if (H5Tget_class(type) != H5T_STRING)
        st = lb_error(LB_ERR_FORMAT, "%s: attribute '%s': expected a string, found %s", file, name, found);
    else if (read_string(attr, type, buf, size) != LB_OK)
        st = lb_error(LB_ERR_FORMAT, "%s: attribute '%s': unreadable string (longer than %d bytes or corrupted)",
                      file, name, MAX_STRING_ATTR);
    lb_h5_close(type);
    lb_h5_close(attr);
    return st;
}

lb_status lb_h5_dataset_info(hid_t dset, const char *where, lb_h5_info *out, const char *file)
{
    memset(out, 0, sizeof *out);
    hid_t type = H5Dget_type(dset);
    hid_t space = H5Dget_space(dset);
    hsize_t dims[H5S_MAX_RANK];
    int rank = space < 0 ? -1 : H5Sget_simple_extent_dims(space, dims, NULL);
    lb_status st = LB_OK;
    if (type < 0 || rank < 0) {
        st = lb_error(LB_ERR_FORMAT, "%s: dataset %s: unreadable type or shape (corrupted file?)", file, where);
    } else {
        out->type_class = H5Tget_class(type);
        out->type_size = H5Tget_size(type);
        out->is_signed = H5Tget_sign(type) == H5T_SGN_2;
        out->rank = rank;
        for (int i = 0; i < rank; i++)
            out->dims[i] = dims[i] > (hsize_t)INT64_MAX ? INT64_MAX : (int64_t)dims[i];
        type_name(out->type_class, out->type_size, out->is_signed, out->type_name, sizeof out->type_name);
    }
    lb_h5_close(space);
    lb_h5_close(type);
    return st;
}

char *lb_h5_info_str(const lb_h5_info *info, char *buf, size_t size)
{
    char shape[128];
    snprintf(buf, size, "%s %s", info->type_name, lb_shape_str(info->rank, info->dims, shape, sizeof shape));
    return buf;
}

lb_status lb_h5_read_all(hid_t dset, int is_float, void *buf, const char *where, const char *file)
{
    if (H5Dread(dset, is_float ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        return lb_error(LB_ERR_FORMAT, "%s: dataset %s: read failed (truncated or corrupted file?)", file, where);
    return LB_OK;
}

lb_status lb_h5_read_rows(hid_t dset, hid_t mtype, int64_t start, int64_t count, void *buf, const char *where,
                          const char *file)
{
    hsize_t dims[H5S_MAX_RANK], off[H5S_MAX_RANK] = {0};
    hid_t fspace = H5Dget_space(dset);
    int rank = fspace < 0 ? -1 : H5Sget_simple_extent_dims(fspace, dims, NULL);
    hid_t mspace = -1;
    herr_t rc = rank < 1 ? -1 : 0;
    if (rc >= 0) {
        off[0] = (hsize_t)start;
        dims[0] = (hsize_t)count;
        mspace = H5Screate_simple(rank, dims, NULL);
        rc = mspace < 0 ? -1 : H5Sselect_hyperslab(fspace, H5S_SELECT_SET, off, NULL, dims, NULL);
    }
    if (rc >= 0)
        rc = H5Dread(dset, mtype, mspace, fspace, H5P_DEFAULT, buf);
    lb_h5_close(mspace);
    lb_h5_close(fspace);
    if (rc < 0)
        return lb_error(LB_ERR_FORMAT, "%s: dataset %s: reading examples [%lld, %lld) failed (truncated or corrupted file?)",
                        file, where, (long long)start, (long long)(start + count));
    return LB_OK;
}
