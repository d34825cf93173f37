/* Read by cppcheck only (scripts/lint --include): jansson.h is a system header cppcheck does not
 * read, so its iteration macros are spelled out here for the analysis. */
#define json_array_foreach(array, index, value)                                                         \
        for (index = 0; index < json_array_size(array) && (value = json_array_get(array, index)); index++)
#define json_object_foreach(object, key, value)                                                         \
        for (key = json_object_iter_key(json_object_iter(object));                                      \
                key && (value = json_object_iter_value(json_object_key_to_iter(key)));                 \
                key = json_object_iter_key(json_object_iter_next(object, json_object_key_to_iter(key))))
